package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// RecordKind names a trajectory record.
type RecordKind string

// The trajectory record kinds.
const (
	RecordRunStart   RecordKind = "run_start"   // task, base commit, model, protocol, mode
	RecordMessage    RecordKind = "message"     // a message added to the history
	RecordToolCall   RecordKind = "tool_call"   // a tool call about to run
	RecordToolResult RecordKind = "tool_result" // its raw output, error flag and duration
	RecordUsage      RecordKind = "usage"       // one model call's tokens, cost and duration
	RecordVerify     RecordKind = "verify"      // a run of the test command
	RecordCompaction RecordKind = "compaction"  // history compacted
	RecordLimit      RecordKind = "limit"       // a limit was reached
	RecordApproval   RecordKind = "approval"    // a person approved or denied a call (note)
	RecordPlan       RecordKind = "plan"        // the planning phase ended with this plan (note)
	RecordOutcome    RecordKind = "outcome"     // how the run ended
)

// Record is one line of a trajectory (JSONL). Secrets are redacted before
// a record is written.
type Record struct {
	Seq  int64      `json:"seq"`
	Time time.Time  `json:"time"`
	Kind RecordKind `json:"kind"`
	Turn int        `json:"turn,omitempty"`

	// run_start
	TaskID string `json:"task_id,omitempty"`
	// BaseCommit is the commit the run started from (Run.BaseCommit).
	BaseCommit string `json:"base_commit,omitempty"`
	Protocol   string `json:"protocol,omitempty"`
	Mode       string `json:"mode,omitempty"`
	// Model is the requested model (run_start) or the one that answered
	// (usage).
	Model string `json:"model,omitempty"`

	Message *Message `json:"message,omitempty"`
	// Call is the tool call of tool_call and tool_result records.
	Call *ToolCall `json:"call,omitempty"`
	// Output is a tool's raw output (before recovery notes), as replay
	// compares it.
	Output  string `json:"output,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
	// Display is what people were shown of a tool result, when it differs
	// from Output.
	Display string `json:"display,omitempty"`

	Usage    *TokenUsage   `json:"usage,omitempty"`
	CostUSD  float64       `json:"cost_usd,omitempty"`
	Duration time.Duration `json:"duration_ns,omitempty"`

	Test *task.TestRun `json:"test,omitempty"`
	Note string        `json:"note,omitempty"`

	// outcome
	Reason     StopReason  `json:"reason,omitempty"`
	Summary    string      `json:"summary,omitempty"`
	Error      string      `json:"error,omitempty"`
	TotalUsage *task.Usage `json:"total_usage,omitempty"`
}

// trajectory writes records as JSONL. A nil *trajectory writes nothing.
type trajectory struct {
	w       io.Writer
	secrets []string
	now     func() time.Time
	seq     int64
	err     error
}

func newTrajectory(w io.Writer, secrets []string, now func() time.Time) *trajectory {
	var keep []string
	for _, s := range secrets {
		if len(s) >= 4 {
			keep = append(keep, s)
		}
	}
	return &trajectory{w: w, secrets: keep, now: now}
}

// write appends one record; after a write error the trajectory is dropped
// (the run goes on).
func (t *trajectory) write(r Record) {
	if t == nil || t.err != nil {
		return
	}
	t.seq++
	r.Seq = t.seq
	r.Time = t.now()
	b, err := marshalLine(r)
	if err != nil {
		t.err = err
		return
	}
	b = redactJSON(b, t.secrets)
	if _, err := t.w.Write(b); err != nil {
		t.err = err
	}
}

func (t *trajectory) message(turn int, m *Message) {
	if t == nil {
		return
	}
	t.write(Record{Kind: RecordMessage, Turn: turn, Message: m})
}

func (t *trajectory) call(turn int, c ToolCall) {
	if t == nil {
		return
	}
	t.write(Record{Kind: RecordToolCall, Turn: turn, Call: &c})
}

func (t *trajectory) result(turn int, c ToolCall, res *toolResult, d time.Duration) {
	if t == nil {
		return
	}
	r := Record{Kind: RecordToolResult, Turn: turn, Call: &c, Output: res.raw, IsError: res.isError, Duration: d}
	if res.display != "" && res.display != res.raw {
		r.Display = res.display
	}
	t.write(r)
}

func (t *trajectory) outcome(turn int, o *Outcome) {
	if t == nil {
		return
	}
	r := Record{Kind: RecordOutcome, Turn: turn, Reason: o.Reason, Summary: o.Summary, TotalUsage: &o.Usage, Test: o.LastTestRun, Duration: o.Duration}
	if o.Err != nil {
		r.Error = o.Err.Error()
	}
	t.write(r)
}

// tokenPatterns match credentials by their shape, redacted even when the
// caller did not list them.
var tokenPatterns = task.CredentialShapes

const redacted = task.Redacted

// redactString removes secrets and credential-shaped tokens from s.
func redactString(s string, secrets []string) string { return task.RedactSecrets(s, secrets) }

// marshalLine encodes v as one JSON line without HTML escaping: code
// keeps its <, > and & as they are, so trajectories read and grep as
// written.
func marshalLine(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// redactJSON removes secrets from encoded JSON (see marshalLine), matching
// them as they appear once escaped inside a JSON string.
func redactJSON(b []byte, secrets []string) []byte {
	s := string(b)
	for _, sec := range secrets {
		enc, _ := marshalLine(sec)
		enc = bytes.TrimSuffix(enc, []byte("\n"))
		esc := string(enc[1 : len(enc)-1])
		s = strings.ReplaceAll(s, esc, redacted)
	}
	return []byte(tokenPatterns.ReplaceAllString(s, redacted))
}

// ReadTrajectory parses a JSONL trajectory. Blank lines are skipped; a
// malformed line is an error naming its line number.
func ReadTrajectory(r io.Reader) ([]Record, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	var out []Record
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var rec Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return nil, fmt.Errorf("trajectory line %d: %w", n, err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read trajectory: %w", err)
	}
	return out, nil
}
