package task

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// FieldError names one field at fault and what is wrong with it.
type FieldError struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

// ValidationError reports every field of a task that is at fault. Callers
// branch on it (errors.As) to answer 400 or exit 2 instead of retrying.
type ValidationError struct {
	Fields []FieldError `json:"fields"`
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Problem
	}
	return "invalid task: " + strings.Join(parts, "; ")
}

// MaxInstructionBytes bounds a task's instruction (the other hard limits
// are in defaults.go).
const MaxInstructionBytes = 64 << 10

var (
	idPattern     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
	commitPattern = regexp.MustCompile(`^[0-9a-fA-F]{4,64}$`)
	toolName      = regexp.MustCompile(`^[a-z_]{1,32}$`)
)

// ValidID reports whether id is a task id Validate accepts (non-empty).
func ValidID(id string) bool { return idPattern.MatchString(id) }

// Validate checks a task and returns a *ValidationError listing every field at
// fault, or nil. It does not touch the network or the file system.
//
// A task is validated where it enters: the queue's Submit (the door of
// every queued task; the API validates before it, ahead of admission) or
// `wrench run`. The dispatcher does not; the worker checks again as a
// defence (microseconds, no I/O) for tasks that came another way, such as
// a message published by hand.
func (t *Task) Validate() error {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if t.ID != "" && !idPattern.MatchString(t.ID) {
		add("id", "must be 1-64 letters, digits, '-' or '_', starting with a letter or digit")
	}
	if t.Tenant != "" && !ValidTenant(t.Tenant) {
		add("tenant", "must be 1-32 lower-case letters, digits, '-' or '_', starting with a letter or digit")
	}
	switch u := strings.TrimSpace(t.Repo.URL); {
	case u == "":
		add("repo.url", "is required")
	case strings.Contains(u, "://"):
		p, err := url.Parse(u)
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may carry a password
		}
		if err != nil {
			add("repo.url", "is not a URL (%s): %v", RedactURL(u), err)
		} else if p.Scheme != "https" && p.Scheme != "http" && p.Scheme != "file" {
			add("repo.url", "scheme %q is not supported (use https://, file:// or a local path)", p.Scheme)
		}
	}
	if strings.ContainsAny(t.Repo.Ref, " \t\n~^:?*[\\") {
		add("repo.ref", "%q is not a valid git ref", t.Repo.Ref)
	}
	if t.Repo.Commit != "" && !commitPattern.MatchString(t.Repo.Commit) {
		add("repo.commit", "%q is not a hex commit id", t.Repo.Commit)
	}
	if pr := t.Output.PullRequest; pr != nil && (pr.Number < 0 || pr.Number > 0 && (pr.Branch == "" || strings.ContainsAny(pr.Branch, " \t\n~^:?*[\\"))) {
		add("output.pull_request", "a follow-up needs a positive number and a valid branch")
	}
	switch {
	case strings.TrimSpace(t.Instruction) == "":
		add("instruction", "is required")
	case len(t.Instruction) > MaxInstructionBytes:
		add("instruction", "is %d bytes; the limit is %d", len(t.Instruction), MaxInstructionBytes)
	}
	switch t.Protocol {
	case "", ProtocolTools, ProtocolText:
	default:
		add("protocol", "%q is not one of tools, text", t.Protocol)
	}
	switch t.Mode {
	case ModeNormal, ModePlan:
	default:
		add("mode", "%q is not one of plan or empty", t.Mode)
	}
	for i, name := range t.AllowedTools {
		if !toolName.MatchString(name) {
			add(fmt.Sprintf("allowed_tools[%d]", i), "%q is not a tool name", name)
		}
	}
	if l := t.Limits; l.MaxTurns < -1 || l.MaxTurns > MaxTurnsHardCap {
		add("limits.max_turns", "must be -1 (unlimited under the hard cap), 0 (default) or 1..%d", MaxTurnsHardCap)
	}
	if t.Limits.MaxCostUSD < 0 {
		add("limits.max_cost_usd", "must not be negative")
	}
	if t.Limits.MaxTokens < 0 {
		add("limits.max_tokens", "must not be negative")
	}
	if d := time.Duration(t.Limits.Timeout); d < 0 || d > MaxTimeout {
		add("limits.timeout", "must be between 0 and %s", MaxTimeout)
	}
	s := t.Sandbox
	switch s.Network {
	case "", "none", "bridge":
	default:
		add("sandbox.network", "%q is not one of none, bridge", s.Network)
	}
	if s.MemoryMB < 0 || (s.MemoryMB > 0 && s.MemoryMB < 64) {
		add("sandbox.memory_mb", "must be at least 64")
	}
	if s.CPUs < 0 {
		add("sandbox.cpus", "must not be negative")
	}
	if s.Pids < 0 || (s.Pids > 0 && s.Pids < 16) {
		add("sandbox.pids", "must be at least 16")
	}
	if s.DiskMB < 0 {
		add("sandbox.disk_mb", "must not be negative")
	}
	switch t.Source.Kind {
	case "", "cli", "api", "github", "bench":
	default:
		add("source.kind", "%q is not one of cli, api, github, bench", t.Source.Kind)
	}
	if t.Grading != nil {
		t.Grading.validate(add)
	}
	if len(errs) > 0 {
		return &ValidationError{Fields: errs}
	}
	return nil
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
