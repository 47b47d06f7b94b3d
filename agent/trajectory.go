package agent

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// RecordKind names a trajectory record.
type RecordKind string

// The trajectory record kinds.
const (
	RecordRunStart   RecordKind = "run_start"   // task, model, protocol, mode
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
	TaskID   string `json:"task_id,omitempty"`
	Protocol string `json:"protocol,omitempty"`
	Mode     string `json:"mode,omitempty"`
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
	b, err := json.Marshal(r)
	if err != nil {
		t.err = err
		return
	}
	b = redactJSON(b, t.secrets)
	b = append(b, '\n')
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
var tokenPatterns = regexp.MustCompile(`\b(sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|AKIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9-]{10,})\b`)

const redacted = "[REDACTED]"

// redactString removes secrets and credential-shaped tokens from s.
func redactString(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, redacted)
		}
	}
	return tokenPatterns.ReplaceAllString(s, redacted)
}

// redactJSON removes secrets from encoded JSON, matching them as they
// appear once escaped inside a JSON string.
func redactJSON(b []byte, secrets []string) []byte {
	s := string(b)
	for _, sec := range secrets {
		enc, _ := json.Marshal(sec)
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
