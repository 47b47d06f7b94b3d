package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// DefaultFinal is the reply once a script's steps run out, unless the
// script sets its own.
const DefaultFinal = "(scripted model: no more steps)"

// Script is a parsed script. It is immutable once parsed and may be shared
// by several handlers; each handler keeps its own position.
type Script struct {
	// Model is the model name the server reports; empty echoes the
	// request's model.
	Model string
	// Final is the reply once the steps run out.
	Final string
	// Steps are the replies, in order.
	Steps []Step
}

// Step is one assistant reply.
type Step struct {
	Content   string
	Thinking  string
	ToolCalls []ToolCall
	// Expect, when set, must match the observations the request carries
	// (see the package documentation).
	Expect *regexp.Regexp
	// FinishReason defaults to "tool_calls" with tool calls, else "stop".
	FinishReason string
	// Usage, when set, is reported instead of the estimate.
	Usage *Usage
	// Fault, when set, is answered before the reply.
	Fault *Fault
}

// ToolCall is one tool call of a step.
type ToolCall struct {
	// ID, when set, is sent instead of the generated id.
	ID   string
	Name string
	// Arguments is the exact arguments string sent, valid JSON or not.
	Arguments string
}

// Usage is the token usage a step reports.
type Usage struct {
	InputTokens  int64 `yaml:"input_tokens"`
	OutputTokens int64 `yaml:"output_tokens"`
}

// FaultKind names a malformed reply.
type FaultKind string

// The malformed replies a fault can produce.
const (
	FaultNoChoices     FaultKind = "no_choices"
	FaultCutStream     FaultKind = "cut_stream"
	FaultGarbage       FaultKind = "garbage"
	FaultEmpty         FaultKind = "empty"
	FaultBadJSONArgs   FaultKind = "bad_json_args"
	FaultMissingCallID FaultKind = "missing_call_id"
)

// Fault is a failure answered before a step's reply.
type Fault struct {
	// Status, when set, is the HTTP status answered.
	Status int `yaml:"status"`
	// RetryAfter is sent as the Retry-After header with Status.
	RetryAfter string `yaml:"retry_after"`
	// Message is the error message sent with Status.
	Message string `yaml:"message"`
	// Kind, when set, is the malformed reply answered.
	Kind FaultKind `yaml:"kind"`
	// Delay is waited before answering.
	Delay time.Duration `yaml:"delay"`
	// Times is how many requests get the fault (default 1).
	Times int `yaml:"times"`
}

// Load reads and parses the script at path.
func Load(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load script: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("load script %s: %w", path, err)
	}
	return s, nil
}

// file mirrors the YAML document.
type file struct {
	Model string     `yaml:"model"`
	Final *string    `yaml:"final"`
	Steps []fileStep `yaml:"steps"`
}

type fileStep struct {
	Content           string         `yaml:"content"`
	Thinking          string         `yaml:"thinking"`
	ToolCalls         []fileToolCall `yaml:"tool_calls"`
	ExpectObservation string         `yaml:"expect_observation"`
	FinishReason      string         `yaml:"finish_reason"`
	Usage             *Usage         `yaml:"usage"`
	Fault             *Fault         `yaml:"fault"`
}

type fileToolCall struct {
	ID        string    `yaml:"id"`
	Name      string    `yaml:"name"`
	Arguments yaml.Node `yaml:"arguments"`
}

// Parse parses a YAML script. Unknown fields, invalid regular expressions,
// arguments that are neither a map nor a string, and inconsistent faults are
// errors.
func Parse(data []byte) (*Script, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f file
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("parse script: empty document")
		}
		return nil, fmt.Errorf("parse script: %s", withoutContent(err))
	}
	s := &Script{Model: f.Model, Final: DefaultFinal}
	if f.Final != nil {
		s.Final = *f.Final
	}
	for i, fs := range f.Steps {
		st, err := parseStep(fs)
		if err != nil {
			return nil, fmt.Errorf("parse script: step %d: %w", i+1, err)
		}
		s.Steps = append(s.Steps, st)
	}
	return s, nil
}

func parseStep(fs fileStep) (Step, error) {
	st := Step{
		Content:      fs.Content,
		Thinking:     fs.Thinking,
		FinishReason: fs.FinishReason,
		Usage:        fs.Usage,
		Fault:        fs.Fault,
	}
	if fs.ExpectObservation != "" {
		re, err := regexp.Compile(fs.ExpectObservation)
		if err != nil {
			return Step{}, fmt.Errorf("expect_observation: %w", err)
		}
		st.Expect = re
	}
	for j, tc := range fs.ToolCalls {
		if tc.Name == "" {
			return Step{}, fmt.Errorf("tool call %d: name is required", j+1)
		}
		args, err := argumentsJSON(&tc.Arguments)
		if err != nil {
			return Step{}, fmt.Errorf("tool call %d (%s): %w", j+1, tc.Name, err)
		}
		st.ToolCalls = append(st.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Name, Arguments: args})
	}
	if err := validateFault(st); err != nil {
		return Step{}, fmt.Errorf("fault: %w", err)
	}
	return st, nil
}

// argumentsJSON turns a YAML arguments node into the arguments string: a
// map is encoded as JSON, a string is taken verbatim, nothing is "{}".
func argumentsJSON(n *yaml.Node) (string, error) {
	switch n.Kind {
	case 0:
		return "{}", nil
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "{}", nil
		}
		if n.Tag != "!!str" {
			return "", fmt.Errorf("arguments must be a map or a string, not %s", n.Tag)
		}
		return n.Value, nil
	case yaml.MappingNode:
		var m map[string]any
		if err := n.Decode(&m); err != nil {
			return "", fmt.Errorf("arguments: %w", err)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(m); err != nil {
			return "", fmt.Errorf("arguments: %w", err)
		}
		return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
	default:
		return "", errors.New("arguments must be a map or a string")
	}
}

func validateFault(st Step) error {
	f := st.Fault
	if f == nil {
		return nil
	}
	if f.Times < 0 {
		return errors.New("times must not be negative")
	}
	if f.Times == 0 {
		f.Times = 1
	}
	if f.Delay < 0 {
		return errors.New("delay must not be negative")
	}
	if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
		return fmt.Errorf("status %d is not an HTTP error status", f.Status)
	}
	if f.Status != 0 && f.Kind != "" {
		return errors.New("status and kind are exclusive")
	}
	if f.RetryAfter != "" && f.Status == 0 {
		return errors.New("retry_after needs a status")
	}
	switch f.Kind {
	case "", FaultNoChoices, FaultCutStream, FaultGarbage, FaultEmpty:
	case FaultBadJSONArgs, FaultMissingCallID:
		if len(st.ToolCalls) == 0 {
			return fmt.Errorf("kind %s needs tool_calls in the step", f.Kind)
		}
	default:
		return fmt.Errorf("unknown kind %q", f.Kind)
	}
	if f.Status == 0 && f.Kind == "" && f.Delay == 0 {
		return errors.New("a fault needs a status, a kind or a delay")
	}
	return nil
}

// quoted matches what a YAML error quotes of the document: a field name
// or a `value`.
var quoted = regexp.MustCompile("field (\\S+) not found|`[^`]*`")

// plausibleKey is what a script's own keys look like.
var plausibleKey = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,32}$`)

// withoutContent is a YAML decoding error that quotes no value of the
// document, and a field name only when it looks like a script's key: a file that is not a script (say
// /etc/shadow named as a script) is reported by line number, never by
// its contents.
func withoutContent(err error) string {
	return quoted.ReplaceAllStringFunc(strings.TrimPrefix(err.Error(), "yaml: "), func(m string) string {
		if name, ok := strings.CutPrefix(m, "field "); ok {
			name = strings.TrimSuffix(name, " not found")
			if plausibleKey.MatchString(name) {
				return m
			}
			return "unexpected content (not a script key) found"
		}
		return "`…`" // a value: never quoted
	})
}
