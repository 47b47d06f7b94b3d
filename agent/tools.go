package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
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

// tool is a built-in tool bound to one run. run executes a call whose
// arguments are a JSON object holding every required field (the toolbox
// checked that); it decodes the rest itself.
type tool interface {
	run(ctx context.Context, call ToolCall, args json.RawMessage) toolResult
}

// toolDef is a built-in tool's contract with the model — its name, its
// description and the JSON Schema of its arguments, stable because scripts
// and prompts use them — and how to bind it to a run.
type toolDef struct {
	name     string
	desc     string
	params   string   // JSON Schema of the arguments object
	required []string // argument names that must be present
	readOnly bool     // available in plan mode
	optional bool     // offered only when enabled or allowlisted
	// bind makes the tool for one run from the kit; each tool takes only
	// what it needs.
	bind func(k *toolKit) tool
}

// toolKit is what a run offers its tools. Each tool's bind picks its part:
// the environment (or one side of it), the read tracker, the approver, the
// sub-run starter, and numbers from the configuration.
type toolKit struct {
	env  sandbox.Env
	seen *readTracker
	// approve asks a person before a command or a write; nil when nobody
	// is asked (ApproveYolo).
	approve approveFunc
	// research starts a research sub-run; nil where there is none (replay).
	research researcher
	cfg      *Config
}

// approveFunc asks whether req may go ahead: nil means yes, anything else
// is the result that refuses it (or reports an interruption).
type approveFunc func(ctx context.Context, req ApprovalRequest) *toolResult

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
	// writes are the files the call changed, in order; the loop records
	// them in the run's file history.
	writes []fileWrite
	// mayWrite says the call may have changed files the agent cannot see
	// (a shell command).
	mayWrite bool
	finish   bool
	summary  string
	// fatal is an infrastructure failure that ends the run (env_error) or a
	// cancellation.
	fatal error
	// exec is the command result, for bash.
	exec *sandbox.ExecResult
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

// fileWrite is one file a call changed: nil before for a new file, nil
// after for a deleted one.
type fileWrite struct {
	path          string
	before, after []byte
}

// changed lists the paths a result wrote, in order.
func (r *toolResult) changed() []string {
	out := make([]string, len(r.writes))
	for i, w := range r.writes {
		out[i] = w.path
	}
	return out
}

// registry is every built-in tool by name, built once.
var registry = func() map[string]*toolDef {
	m := map[string]*toolDef{}
	for _, t := range []*toolDef{
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
func toolSet(mode task.Mode, allowed []string, enabled map[string]bool) ([]*toolDef, error) {
	for _, name := range allowed {
		if registry[name] == nil {
			return nil, fmt.Errorf("%w: unknown tool %q in the allowlist", ErrInvalidRun, name)
		}
	}
	var out []*toolDef
	for _, name := range toolOrder {
		t := registry[name]
		switch {
		case mode == task.ModePlan && !t.readOnly:
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
func (a *Agent) toolSet(mode task.Mode, allowed []string) ([]*toolDef, error) {
	return toolSet(mode, allowed, map[string]bool{ToolResearch: a.cfg.SubAgents.Enabled, ToolSearch: a.cfg.CodeSearch})
}

// Tools returns the specs of the tools a run in mode with the allowlist
// would offer the model (optional tools only when the allowlist names
// them; Agent.Tools also counts the configuration).
func Tools(mode task.Mode, allowed []string) ([]ToolSpec, error) {
	ts, err := toolSet(mode, allowed, nil)
	if err != nil {
		return nil, err
	}
	return specsOf(ts), nil
}

// Tools returns the specs of the tools a run of this Agent in mode with
// the allowlist would offer the model.
func (a *Agent) Tools(mode task.Mode, allowed []string) ([]ToolSpec, error) {
	ts, err := a.toolSet(mode, allowed)
	if err != nil {
		return nil, err
	}
	return specsOf(ts), nil
}

func specsOf(ts []*toolDef) []ToolSpec {
	specs := make([]ToolSpec, len(ts))
	for i, t := range ts {
		specs[i] = t.spec()
	}
	return specs
}

func (t *toolDef) spec() ToolSpec {
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

// toolbox is one run's tools: every built-in tool bound to the run, and
// the ones offered to the model now (the plan phase offers fewer).
type toolbox struct {
	bound   map[string]tool
	offered []*toolDef
	index   map[string]*toolDef
	// mode names the run's mode in the error for a tool not offered.
	mode string
}

// newToolbox binds every built-in tool with k; offer picks what the model
// sees.
func newToolbox(k *toolKit) *toolbox {
	tb := &toolbox{bound: make(map[string]tool, len(registry))}
	for name, def := range registry {
		tb.bound[name] = def.bind(k)
	}
	return tb
}

// offer makes defs the tools the model may call, in mode (for messages).
func (tb *toolbox) offer(defs []*toolDef, mode string) {
	tb.offered, tb.mode = defs, mode
	tb.index = make(map[string]*toolDef, len(defs))
	for _, d := range defs {
		tb.index[d.name] = d
	}
}

// has reports whether the tool named is offered.
func (tb *toolbox) has(name string) bool { return tb.index[name] != nil }

// names lists the offered tools in order.
func (tb *toolbox) names() []string {
	out := make([]string, len(tb.offered))
	for i, d := range tb.offered {
		out[i] = d.name
	}
	return out
}

// dispatch runs one call, turning an unknown or unavailable tool and bad
// arguments into format errors.
func (tb *toolbox) dispatch(ctx context.Context, call ToolCall) toolResult {
	def := tb.index[call.Name]
	if def == nil {
		names := slices.Sorted(maps.Keys(tb.index))
		if registry[call.Name] != nil {
			return formatError("tool %q is not available in this run (mode %q). Available tools: %s.", call.Name, tb.mode, strings.Join(names, ", "))
		}
		return formatError("unknown tool %q. Available tools: %s.", call.Name, strings.Join(names, ", "))
	}
	var fields map[string]json.RawMessage
	raw := strings.TrimSpace(call.Arguments)
	if raw == "" {
		raw = "{}"
	}
	if r := decodeArgs(call.Name, raw, def.required, &fields); r != nil {
		return *r
	}
	return tb.bound[call.Name].run(ctx, call, json.RawMessage(raw))
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

// envFailure turns an Env error into a tool result: cancellation and
// infrastructure failures end the run, anything else is told to the model.
func envFailure(ctx context.Context, op string, err error) toolResult {
	switch {
	case ctx.Err() != nil:
		return interrupted(ctx)
	case envFailed(err):
		return toolResult{fatal: fmt.Errorf("%s: %w", op, err), output: "Error: the environment failed", isError: true}
	case errors.Is(err, fs.ErrNotExist):
		return errorResult("%s: no such file or directory.", op)
	case errors.Is(err, sandbox.ErrEscape):
		// Before ErrPermission: a symbolic link out of the workspace is
		// not a permission problem the model could fix with chmod.
		return errorResult("%s: the path leads outside %s (through a symbolic link?); only files under it can be used.", op, sandbox.WorkDir)
	case errors.Is(err, fs.ErrPermission):
		return errorResult("%s: permission denied.", op)
	}
	return errorResult("%s: %v", op, err)
}

// interrupted is the result of a call cut short by ctx.
func interrupted(ctx context.Context) toolResult {
	return toolResult{fatal: ctx.Err(), output: "Error: interrupted", isError: true}
}
