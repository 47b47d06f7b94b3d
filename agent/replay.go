package agent

import (
	"context"
	"fmt"
	"strings"
)

// ReplayReport says how a re-execution of recorded tool calls compared
// with the recording.
type ReplayReport struct {
	// Calls counts the tool calls re-executed.
	Calls int `json:"calls"`
	// Matched counts those whose output equals the recorded one (after
	// masking durations, addresses and temp paths).
	Matched int `json:"matched"`
	// Skipped counts finish and research calls (research needs a model)
	// and calls without a recorded result.
	Skipped int `json:"skipped"`
	// Divergences lists every call whose output differs, in order.
	Divergences []Divergence `json:"divergences,omitempty"`
}

// Divergence is one re-executed call whose observation differs.
type Divergence struct {
	// Seq is the tool_result record's sequence number; Turn its turn.
	Seq       int64  `json:"seq"`
	Turn      int    `json:"turn"`
	CallID    string `json:"call_id"`
	Tool      string `json:"tool"`
	Arguments string `json:"arguments"`
	Recorded  string `json:"recorded"`
	Replayed  string `json:"replayed"`
}

// First returns the first divergence, or nil when the replay matched.
func (r ReplayReport) First() *Divergence {
	if len(r.Divergences) == 0 {
		return nil
	}
	return &r.Divergences[0]
}

// Replay re-executes the tool calls of a trajectory, in order, against env
// (a fresh sandbox with the task's repository) and reports where the
// observations diverge from the recorded ones. Tools keep their rules
// (read-before-edit included), so a faithful replay sees the same results.
// Verification, checkpoints and model calls are not replayed. The error is
// for cancellation and environment failures.
func Replay(ctx context.Context, env Env, records []Record) (ReplayReport, error) {
	if env == nil {
		return ReplayReport{}, fmt.Errorf("%w: nil Env", ErrInvalidRun)
	}
	a := New(Config{})
	tools, _ := toolSet(ModeNormal, nil, map[string]bool{ToolSearch: true})
	s := &runState{
		a:         a,
		r:         &Run{Env: env},
		tools:     tools,
		toolIndex: map[string]*tool{},
		seen:      map[string][32]byte{},
		history:   map[string][]FileVersion{},
		rec:       newRecovery(a.cfg.Recovery.AttemptBudget),
		loops:     newLoopDetector(a.cfg.Recovery.LoopWindow, a.cfg.Recovery.LoopRepeats),
	}
	for _, t := range tools {
		s.toolIndex[t.name] = t
	}
	// A tool_result follows its tool_call; pair them by order, since call
	// ids are not always unique across turns.
	pending := map[string]*Record{}
	var rep ReplayReport
	for i := range records {
		rec := &records[i]
		if rec.Call == nil {
			continue
		}
		switch rec.Kind {
		case RecordToolCall:
			if pending[rec.Call.ID] != nil {
				rep.Skipped++ // a call whose result was never recorded
			}
			pending[rec.Call.ID] = rec
			continue
		case RecordToolResult:
		default:
			continue
		}
		callRec := pending[rec.Call.ID]
		delete(pending, rec.Call.ID)
		// finish has nothing to re-execute; research asks a model.
		if callRec == nil || callRec.Call.Name == ToolFinish || callRec.Call.Name == ToolResearch {
			rep.Skipped++
			continue
		}
		s.turn = callRec.Turn
		res := s.dispatch(ctx, *callRec.Call)
		if res.fatal != nil {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			return rep, fmt.Errorf("replay call %s (%s): %w", callRec.Call.ID, callRec.Call.Name, res.fatal)
		}
		rep.Calls++
		got := res.raw
		if got == "" {
			got = res.output
		}
		// Credential-shaped tokens were redacted when recorded.
		if maskVolatile(redactString(got, nil)) == maskVolatile(rec.Output) {
			rep.Matched++
			continue
		}
		rep.Divergences = append(rep.Divergences, Divergence{
			Seq: rec.Seq, Turn: callRec.Turn, CallID: callRec.Call.ID, Tool: callRec.Call.Name,
			Arguments: callRec.Call.Arguments, Recorded: rec.Output, Replayed: got,
		})
	}
	rep.Skipped += len(pending)
	return rep, ctx.Err()
}

// maskVolatile hides what legitimately differs between two executions:
// durations, addresses and temp paths.
func maskVolatile(s string) string {
	s = reDuration.ReplaceAllString(s, "T")
	if strings.Contains(s, "0x") {
		s = reHex.ReplaceAllString(s, "0xADDR")
	}
	if strings.Contains(s, "/tmp") || strings.Contains(s, "/var/") || strings.Contains(s, "/private/") {
		s = reTmp.ReplaceAllString(s, "$1/TMP")
	}
	return s
}
