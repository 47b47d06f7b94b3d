package egress

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// Record is the audit of one tunnel (CONNECT) or one forwarded request.
type Record struct {
	TaskID string `json:"task_id"`
	Phase  string `json:"phase"`
	// Host is the host:port asked for.
	Host    string `json:"host"`
	Allowed bool   `json:"allowed"`
	// Rule is the allowlist pattern that allowed the host ("" when denied).
	Rule string `json:"rule,omitempty"`
	// Reason says why the host was allowed or denied.
	Reason string `json:"reason"`
	// Method is CONNECT for a tunnel, else the forwarded request's method.
	Method string `json:"method"`
	// Status is the status code the client got (the host's, or the
	// proxy's own answer); 0 when it got none.
	Status int `json:"status,omitempty"`
	// BytesUp and BytesDown count what was delivered: tunnel payload for
	// CONNECT, message bodies for forwarded requests.
	BytesUp   int64         `json:"bytes_up"`
	BytesDown int64         `json:"bytes_down"`
	Start     time.Time     `json:"start"`
	Duration  time.Duration `json:"duration_ns"`
	// Err says how an allowed connection failed or was cut (a dial error,
	// a byte cap, the idle timeout, the session closing); "" when it ended
	// normally.
	Err string `json:"err,omitempty"`
}

// Verdict is "allowed" or "denied".
func (r Record) Verdict() string {
	if r.Allowed {
		return "allowed"
	}
	return "denied"
}

// Event is the task event that reports r ("egress allowed host:port, …").
func (r Record) Event() task.Event {
	text := fmt.Sprintf("egress %s %s", r.Verdict(), r.Host)
	if r.Allowed {
		text += fmt.Sprintf(" (%s), %d bytes up, %d down", r.Method, r.BytesUp, r.BytesDown)
	}
	if r.Reason != "" {
		text += ": " + r.Reason
	}
	if r.Err != "" {
		text += "; " + r.Err
	}
	return task.Event{
		TaskID: r.TaskID, Time: r.Start.Add(r.Duration), Kind: task.EventEgress, Phase: r.Phase,
		Text: text, IsError: !r.Allowed || r.Err != "", Elapsed: task.Duration(r.Duration),
		Egress: &task.EgressConnection{Host: r.Host, Allowed: r.Allowed, Rule: r.Rule, BytesUp: r.BytesUp, BytesDown: r.BytesDown},
	}
}

// Summary totals records by host and verdict for a result (see
// task.SetupRun.Egress). Its methods are safe for concurrent use, so Add
// can be (part of) a session's Audit.
type Summary struct {
	mu sync.Mutex
	m  map[summaryKey]*task.EgressSummary
}

// maxSummaryHosts bounds a Summary: hosts past it count as OtherHosts.
const maxSummaryHosts = 256

// OtherHosts is the host of a Summary's entry for hosts past its bound.
const OtherHosts = "(other hosts)"

type summaryKey struct {
	host    string
	allowed bool
}

// Add counts r.
func (s *Summary) Add(r Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[summaryKey]*task.EgressSummary{}
	}
	k := summaryKey{r.Host, r.Allowed}
	e := s.m[k]
	if e == nil && len(s.m) >= maxSummaryHosts {
		k.host = OtherHosts
		e = s.m[k]
	}
	if e == nil {
		e = &task.EgressSummary{Host: k.host, Allowed: r.Allowed}
		s.m[k] = e
	}
	e.Connections++
	e.Bytes += r.BytesUp + r.BytesDown
}

// Hosts returns the totals, sorted by host, denied before allowed.
func (s *Summary) Hosts() []task.EgressSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]task.EgressSummary, 0, len(s.m))
	for _, e := range s.m {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Host != out[j].Host {
			return out[i].Host < out[j].Host
		}
		return !out[i].Allowed && out[j].Allowed
	})
	return out
}
