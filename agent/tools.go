package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The built-in tool names (stable: scripts and prompts use them).
const (
	ToolBash          = "bash"
	ToolView          = "view"
	ToolLs            = "ls"
	ToolGlob          = "glob"
	ToolGrep          = "grep"
	ToolEdit          = "edit"
	ToolWrite         = "write"
	ToolPatch         = "patch"
	ToolSearchReplace = "search_replace"
	ToolFinish        = "finish"
	// ToolResearch is optional (Config.SubAgents): a read-only sub-run.
	ToolResearch = "research"
	// ToolSearch is optional (Config.CodeSearch): ranked code search.
	ToolSearch = "search"
)

// tool is one built-in tool.
type tool struct {
	name     string
	desc     string
	params   string   // JSON Schema of the arguments object
	required []string // argument names that must be present
	readOnly bool     // available in plan mode
	optional bool     // offered only when enabled or allowlisted
	// run executes a call whose arguments parsed.
	run func(ctx context.Context, s *runState, args json.RawMessage) toolResult
}

// toolResult is what one tool call produced.
type toolResult struct {
	output string // the text sent to the model
	// display is the text shown to people (events); empty means output.
	display string
	isError bool
	// raw is output before recovery notes were added; it is what the
	// trajectory records and replay compares.
	raw string
	// format marks a malformed call (bad JSON, unknown tool, missing field).
	format bool
	// changed lists the paths the call wrote.
	changed []string
	// mayWrite says the call may have changed files the agent cannot see
	// (a shell command).
	mayWrite bool
	finish   bool
	summary  string
	// fatal is an infrastructure failure that ends the run (env_error) or a
	// cancellation.
	fatal error
	// exec is the command result, for bash.
	exec *ExecResult
	// cmd is the bash command, for recovery bookkeeping.
	cmd string
	// denied says a person refused the call (ApproveConfirm); deniedErr is
	// the Approver's error, if it failed.
	denied    bool
	deniedErr error
}

func errorResult(format string, args ...any) toolResult {
	return toolResult{output: "Error: " + fmt.Sprintf(format, args...), isError: true}
}

// formatError is a malformed call: it counts towards MaxFormatErrors.
func formatError(format string, args ...any) toolResult {
	r := errorResult(format, args...)
	r.format = true
	return r
}

// registry is every built-in tool by name, built once.
var registry = func() map[string]*tool {
	m := map[string]*tool{}
	for _, t := range []*tool{
		bashTool, viewTool, lsTool, globTool, grepTool,
		editTool, writeTool, patchTool, searchReplaceTool, searchTool, researchTool, finishTool,
	} {
		m[t.name] = t
	}
	return m
}()

// toolOrder is the order tools are offered to the model.
var toolOrder = []string{ToolView, ToolLs, ToolGlob, ToolGrep, ToolSearch, ToolBash, ToolEdit, ToolWrite, ToolPatch, ToolSearchReplace, ToolResearch, ToolFinish}

// toolSet picks the tools a run may use: all, or the read-only ones in plan
// mode, intersected with the allowlist; finish is always there. Optional
// tools (research, search) are offered only when enabled or named in the
// allowlist.
func toolSet(mode Mode, allowed []string, enabled map[string]bool) ([]*tool, error) {
	for _, name := range allowed {
		if registry[name] == nil {
			return nil, fmt.Errorf("%w: unknown tool %q in the allowlist", ErrInvalidRun, name)
		}
	}
	var out []*tool
	for _, name := range toolOrder {
		t := registry[name]
		switch {
		case mode == ModePlan && !t.readOnly:
			continue
		case t.optional && !enabled[name] && !slices.Contains(allowed, name):
			continue
		case name != ToolFinish && len(allowed) > 0 && !slices.Contains(allowed, name):
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

// toolSet is toolSet with the optional tools the Agent's configuration
// enables.
func (a *Agent) toolSet(mode Mode, allowed []string) ([]*tool, error) {
	return toolSet(mode, allowed, map[string]bool{ToolResearch: a.cfg.SubAgents.Enabled, ToolSearch: a.cfg.CodeSearch})
}

// Tools returns the specs of the tools a run in mode with the allowlist
// would offer the model (optional tools only when the allowlist names
// them; Agent.Tools also counts the configuration).
func Tools(mode Mode, allowed []string) ([]ToolSpec, error) {
	ts, err := toolSet(mode, allowed, nil)
	if err != nil {
		return nil, err
	}
	return specsOf(ts), nil
}

// Tools returns the specs of the tools a run of this Agent in mode with
// the allowlist would offer the model.
func (a *Agent) Tools(mode Mode, allowed []string) ([]ToolSpec, error) {
	ts, err := a.toolSet(mode, allowed)
	if err != nil {
		return nil, err
	}
	return specsOf(ts), nil
}

func specsOf(ts []*tool) []ToolSpec {
	specs := make([]ToolSpec, len(ts))
	for i, t := range ts {
		specs[i] = t.spec()
	}
	return specs
}

func (t *tool) spec() ToolSpec {
	return ToolSpec{Name: t.name, Description: t.desc, Parameters: json.RawMessage(t.params)}
}

// decodeArgs checks that raw is a JSON object holding every required field
// and decodes it into v. Every failure is a format error the model sees.
func decodeArgs(name, raw string, required []string, v any) *toolResult {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		raw = "{}"
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &fields); err != nil {
		r := formatError("the arguments of %s are not a JSON object (%v). Send the arguments as one valid JSON object.", name, err)
		return &r
	}
	var missing []string
	for _, f := range required {
		if v, ok := fields[f]; !ok || bytes.Equal(v, []byte("null")) {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		r := formatError("%s is missing required argument(s): %s.", name, strings.Join(missing, ", "))
		return &r
	}
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		r := formatError("the arguments of %s do not fit its schema: %v.", name, err)
		return &r
	}
	return nil
}

// dispatch runs one call, turning an unknown or unavailable tool and bad
// arguments into format errors.
func (s *runState) dispatch(ctx context.Context, call ToolCall) toolResult {
	t := s.toolIndex[call.Name]
	if t == nil {
		names := make([]string, 0, len(s.toolIndex))
		for n := range s.toolIndex {
			names = append(names, n)
		}
		sort.Strings(names)
		if registry[call.Name] != nil {
			return formatError("tool %q is not available in this run (mode %q). Available tools: %s.", call.Name, s.modeName(), strings.Join(names, ", "))
		}
		return formatError("unknown tool %q. Available tools: %s.", call.Name, strings.Join(names, ", "))
	}
	s.call = call
	var fields map[string]json.RawMessage
	raw := strings.TrimSpace(call.Arguments)
	if raw == "" {
		raw = "{}"
	}
	if r := decodeArgs(call.Name, raw, t.required, &fields); r != nil {
		return *r
	}
	return t.run(ctx, s, json.RawMessage(raw))
}

// args decodes a call's arguments into v; the required fields were checked
// by dispatch.
func args[T any](name string, raw json.RawMessage) (T, *toolResult) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		r := formatError("the arguments of %s do not fit its schema: %v.", name, err)
		return v, &r
	}
	return v, nil
}
