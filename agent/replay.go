package agent

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
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
func Replay(ctx context.Context, env sandbox.Env, records []Record) (ReplayReport, error) {
	if env == nil {
		return ReplayReport{}, fmt.Errorf("%w: nil Env", ErrInvalidRun)
	}
	cfg := New(Config{}).cfg
	defs, _ := toolSet(task.ModeNormal, nil, map[string]bool{ToolSearch: true})
	tools := newToolbox(&toolKit{env: env, seen: newReadTracker(), cfg: &cfg})
	tools.offer(defs, "normal")
	pairs, skipped := pairCalls(records)
	rep := ReplayReport{Skipped: skipped}
	for _, pr := range pairs {
		call := pr.call.Call
		// finish has nothing to re-execute; research asks a model.
		if call.Name == ToolFinish || call.Name == ToolResearch {
			rep.Skipped++
			continue
		}
		res := tools.dispatch(ctx, *call)
		if res.fatal != nil {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			return rep, fmt.Errorf("replay call %s (%s): %w", call.ID, call.Name, res.fatal)
		}
		rep.Calls++
		got := cmp.Or(res.raw, res.output)
		// Credential-shaped tokens were redacted when recorded.
		if maskVolatile(redactString(got, nil)) == maskVolatile(pr.result.Output) {
			rep.Matched++
			continue
		}
		rep.Divergences = append(rep.Divergences, Divergence{
			Seq: pr.result.Seq, Turn: pr.call.Turn, CallID: call.ID, Tool: call.Name,
			Arguments: call.Arguments, Recorded: pr.result.Output, Replayed: got,
		})
	}
	return rep, ctx.Err()
}

// replayPair is a recorded tool call and its result.
type replayPair struct {
	call, result *Record
}

// pairCalls pairs each tool_result with the tool_call before it of the
// same id (ids are not always unique across turns, so by order). It counts
// as skipped a call whose result was never recorded and a result without a
// call.
func pairCalls(records []Record) ([]replayPair, int) {
	pending := map[string]*Record{}
	var pairs []replayPair
	skipped := 0
	for i := range records {
		rec := &records[i]
		if rec.Call == nil {
			continue
		}
		switch rec.Kind {
		case RecordToolCall:
			if pending[rec.Call.ID] != nil {
				skipped++
			}
			pending[rec.Call.ID] = rec
		case RecordToolResult:
			if c := pending[rec.Call.ID]; c != nil {
				pairs = append(pairs, replayPair{call: c, result: rec})
			} else {
				skipped++
			}
			delete(pending, rec.Call.ID)
		}
	}
	return pairs, skipped + len(pending)
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
