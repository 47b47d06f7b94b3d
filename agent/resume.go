package agent

import (
	"encoding/hex"
	"slices"

	"github.com/wrenchworks/wrench/task"
)

// DefaultSaveEvery is how many turns pass between save points without a
// verified checkpoint (Run.SaveEvery).
const DefaultSaveEvery = 5

// SavePoint is what a later attempt needs to continue a run where this one
// was: the conversation, its turn count and model use, and the files the
// model had read. The workspace's tree at that moment goes with it: the
// caller keeps both (Run.OnSave) and restores the tree before handing the
// save point to the next run (Run.Resume).
type SavePoint struct {
	// Turn is the number of turns the conversation has had.
	Turn int `json:"turn"`
	// Usage is the run's model use so far (Run.Spent included).
	Usage task.Usage `json:"usage"`
	// Messages is the conversation, system prompt first.
	Messages []Message `json:"messages"`
	// Read maps each file the model has seen to the SHA-256 of the content
	// it saw (the read-before-edit rule carries over).
	Read map[string]string `json:"read,omitempty"`
	// Checkpoint is the last verified checkpoint, of the saving run's
	// workspace (the base checkpoint when none passed yet).
	Checkpoint string `json:"checkpoint,omitempty"`
	// Verified says the save was made for a verified checkpoint taken
	// this turn, rather than for the turn count.
	Verified bool `json:"verified,omitempty"`
}

// saveState is when the run last saved.
type saveState struct {
	turn       int
	checkpoint string
}

// resume starts the run from r.Resume: its turn count and read files (the
// conversation is adopted as a History, see initMessages).
func (s *runState) resume() {
	sp := s.r.Resume
	if sp == nil {
		return
	}
	s.turn = sp.Turn
	s.usage.Turns = sp.Turn
	for p, h := range sp.Read {
		var sum [32]byte
		if b, err := hex.DecodeString(h); err == nil && len(b) == len(sum) {
			copy(sum[:], b)
			s.seen.seen[p] = sum
		}
	}
	s.saved = saveState{turn: sp.Turn}
}

// maybeSave calls Run.OnSave at the end of a turn that made a verified
// checkpoint, and of every SaveEvery-th turn since the last save.
func (s *runState) maybeSave() {
	if s.r.OnSave == nil {
		return
	}
	every := s.r.SaveEvery
	if every <= 0 {
		every = DefaultSaveEvery
	}
	if s.ver.goodID == s.saved.checkpoint && s.turn-s.saved.turn < every {
		return
	}
	s.save()
}

// save calls Run.OnSave with the run as it is now, at the end of a turn.
func (s *runState) save() {
	if s.r.OnSave == nil {
		return
	}
	verified := s.ver.goodID != s.saved.checkpoint
	read := make(map[string]string, len(s.seen.seen))
	for p, h := range s.seen.seen {
		read[p] = hex.EncodeToString(h[:])
	}
	s.saved = saveState{turn: s.turn, checkpoint: s.ver.goodID}
	s.r.OnSave(SavePoint{Turn: s.turn, Usage: s.usage, Messages: slices.Clone(s.msgs), Read: read,
		Checkpoint: s.ver.goodID, Verified: verified})
}
