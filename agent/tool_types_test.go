package agent

// Each tool alone: built from exactly what it needs (an environment or one
// side of it, a read tracker, an approver), without a run or a model.

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

func runTool(t *testing.T, tl tool, name string, args any) toolResult {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return tl.run(context.Background(), ToolCall{ID: "c1", Name: name, Arguments: string(raw)}, raw)
}

// approvals records requests and answers with deny.
type approvals struct {
	reqs []ApprovalRequest
	deny bool
}

func (a *approvals) approve(_ context.Context, req ApprovalRequest) *toolResult {
	a.reqs = append(a.reqs, req)
	if a.deny {
		return &toolResult{output: "denied", isError: true, denied: true}
	}
	return nil
}

func TestViewMarksRead(t *testing.T) {
	env := memenv.New(map[string]string{"a.go": "one\ntwo\nthree\n", "bin": "x\x00y"})
	seen := newReadTracker()
	v := &view{files: env, seen: seen, maxOutput: 10000}
	res := runTool(t, v, ToolView, map[string]any{"path": "a.go", "offset": 2, "limit": 1})
	if res.isError || !strings.Contains(res.output, "     2\ttwo") || strings.Contains(res.output, "three\n") {
		t.Errorf("view = %q", res.output)
	}
	if seen.check("a.go", []byte("one\ntwo\nthree\n")) != nil {
		t.Error("view did not mark the file read")
	}
	if res := runTool(t, v, ToolView, map[string]any{"path": "bin"}); !strings.Contains(res.output, "binary") {
		t.Errorf("binary = %q", res.output)
	}
	if res := runTool(t, v, ToolView, map[string]any{"path": "a.go", "offset": 9}); !res.isError {
		t.Errorf("offset past the end = %q", res.output)
	}
}

func TestEditNeedsRead(t *testing.T) {
	env := memenv.New(map[string]string{"a.go": "package a\n"})
	seen := newReadTracker()
	e := &edit{&fileWriter{files: env, seen: seen, maxOutput: 10000}}
	res := runTool(t, e, ToolEdit, map[string]any{"path": "a.go", "old_string": "a", "new_string": "b"})
	if !res.isError || !strings.Contains(res.output, "has not been read") || len(res.writes) != 0 {
		t.Errorf("edit of an unread file = %+v", res)
	}
	seen.saw("a.go", []byte("package a\n"))
	res = runTool(t, e, ToolEdit, map[string]any{"path": "a.go", "old_string": "package a", "new_string": "package b"})
	if res.isError || len(res.writes) != 1 || string(res.writes[0].after) != "package b\n" || string(res.writes[0].before) != "package a\n" {
		t.Fatalf("edit = %+v", res)
	}
	if got, _ := env.File("a.go"); got != "package b\n" {
		t.Errorf("file = %q", got)
	}
	if seen.check("a.go", []byte("package b\n")) != nil {
		t.Error("the edit's own result does not count as read")
	}
}

func TestWriteAsksFirst(t *testing.T) {
	env := memenv.New(nil)
	ask := &approvals{deny: true}
	w := &write{&fileWriter{files: env, seen: newReadTracker(), approve: ask.approve, maxOutput: 10000}}
	res := runTool(t, w, ToolWrite, map[string]any{"path": "new.txt", "content": "hi\n"})
	if !res.denied || len(ask.reqs) != 1 || ask.reqs[0].Call.ID != "c1" || !slices.Equal(ask.reqs[0].Paths, []string{"new.txt"}) || !strings.Contains(ask.reqs[0].Diff, "+hi") {
		t.Errorf("denied write = %+v, requests %+v", res, ask.reqs)
	}
	if _, ok := env.File("new.txt"); ok {
		t.Error("a denied write wrote")
	}
}

// failingFiles fails WriteFile for one path.
type failingFiles struct {
	*memenv.Env
	path string
}

func (f failingFiles) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	if p == f.path {
		return &sandbox.Error{Kind: sandbox.ErrLimit, Op: "write", Err: errors.New("disk full")}
	}
	return f.Env.WriteFile(ctx, p, data, mode)
}

func TestPatchAllOrNothing(t *testing.T) {
	files := map[string]string{"a.txt": "a\n", "b.txt": "b\n"}
	env := memenv.New(files)
	seen := newReadTracker()
	for p, c := range files {
		seen.saw(p, []byte(c))
	}
	p := &patch{&fileWriter{files: failingFiles{env, "b.txt"}, seen: seen, maxOutput: 10000}}
	text := "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+A\n*** Update File: b.txt\n@@\n-b\n+B\n*** End Patch"
	res := runTool(t, p, ToolPatch, map[string]any{"patch_text": text})
	if res.fatal == nil || !sandbox.Broken(res.fatal) || len(res.writes) != 0 {
		t.Errorf("patch on a full disk = %+v", res)
	}
	if got := env.Files(); got["a.txt"] != "a\n" || got["b.txt"] != "b\n" {
		t.Errorf("after a failed patch: %q", got)
	}
	if seen.check("a.txt", []byte("a\n")) != nil {
		t.Error("a failed patch changed what counts as read")
	}

	p = &patch{&fileWriter{files: env, seen: seen, maxOutput: 10000}}
	move := "*** Begin Patch\n*** Update File: a.txt\n*** Move to: c.txt\n@@\n-a\n+C\n*** End Patch"
	res = runTool(t, p, ToolPatch, map[string]any{"patch_text": move})
	if res.isError || !slices.Equal(res.changed(), []string{"c.txt", "a.txt"}) {
		t.Fatalf("move = %+v", res)
	}
	if res.writes[0].before != nil || string(res.writes[0].after) != "C\n" || string(res.writes[1].before) != "a\n" || res.writes[1].after != nil {
		t.Errorf("a move writes the new file and deletes the old: %+v", res.writes)
	}
	if seen.check("c.txt", []byte("C\n")) != nil || seen.check("a.txt", []byte("a\n")) == nil {
		t.Error("after a move the new path counts as read and the old one not")
	}
}

func TestPatchNeedsRead(t *testing.T) {
	env := memenv.New(map[string]string{"a.txt": "a\n"})
	p := &patch{&fileWriter{files: env, seen: newReadTracker(), maxOutput: 10000}}
	res := runTool(t, p, ToolPatch, map[string]any{"patch_text": "*** Begin Patch\n*** Delete File: a.txt\n*** End Patch"})
	if !res.isError || !strings.HasSuffix(res.output, "Nothing was changed.") {
		t.Errorf("patch of an unread file = %q", res.output)
	}
	if _, ok := env.File("a.txt"); !ok {
		t.Error("the refused patch deleted the file")
	}
}

// execFunc is a sandbox.Execer.
type execFunc func(context.Context, sandbox.ExecRequest) (sandbox.ExecResult, error)

func (f execFunc) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	return f(ctx, req)
}

func TestBashAlone(t *testing.T) {
	ask := &approvals{}
	var got sandbox.ExecRequest
	b := &bash{
		exec: execFunc(func(_ context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
			got = req
			return sandbox.ExecResult{ExitCode: 2, Output: []byte("no such file\n")}, nil
		}),
		approve: ask.approve, timeout: 60e9, maxTimeout: 600e9, maxOutput: 1000,
	}
	res := runTool(t, b, ToolBash, map[string]any{"command": "cat x", "timeout_s": 5})
	if !res.isError || res.exec == nil || res.cmd != "cat x" || !res.mayWrite || !strings.HasPrefix(res.output, "Exit code: 2") {
		t.Errorf("bash = %+v", res)
	}
	if got.Command != "cat x" || got.Timeout != 5e9 || len(ask.reqs) != 1 || ask.reqs[0].Command != "cat x" {
		t.Errorf("exec request %+v, approvals %+v", got, ask.reqs)
	}
	b.exec = execFunc(func(context.Context, sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{}, errors.New("stream closed")
	})
	if res := runTool(t, b, ToolBash, map[string]any{"command": "ls"}); !errors.Is(res.fatal, ErrEnvFailed) {
		t.Errorf("exec error = %+v", res)
	}
}

// researchers answers research calls.
type researchers struct {
	refusal string
	calls   []int
}

func (r *researchers) research(_ context.Context, question string, n int) (*Outcome, string, error) {
	if r.refusal != "" {
		return nil, r.refusal, nil
	}
	r.calls = append(r.calls, n)
	return &Outcome{Reason: StopFinished, Summary: "found " + question}, "", nil
}

func TestResearchCountsRuns(t *testing.T) {
	start := &researchers{}
	r := &research{start: start, max: 2, maxOutput: 1000}
	for i := range 3 {
		res := runTool(t, r, ToolResearch, map[string]any{"question": "where"})
		if wantErr := i == 2; res.isError != wantErr {
			t.Errorf("call %d = %+v", i+1, res)
		}
	}
	if !slices.Equal(start.calls, []int{1, 2}) {
		t.Errorf("sub-runs %v", start.calls)
	}
	start.refusal = "no cost budget is left for a research sub-agent."
	r.runs = 0
	if res := runTool(t, r, ToolResearch, map[string]any{"question": "where"}); !strings.Contains(res.output, "no cost budget") || r.runs != 0 {
		t.Errorf("refused = %+v (runs %d)", res, r.runs)
	}
}

func TestToolboxDispatch(t *testing.T) {
	cfg := New(Config{}).cfg
	tb := newToolbox(&toolKit{env: memenv.New(map[string]string{"a": "x\n"}), seen: newReadTracker(), cfg: &cfg})
	defs, _ := toolSet(task.ModePlan, nil, nil)
	tb.offer(defs, "plan")
	for _, tc := range []struct {
		call ToolCall
		want string
	}{
		{ToolCall{Name: "nope"}, `unknown tool "nope"`},
		{ToolCall{Name: ToolBash, Arguments: `{"command":"ls"}`}, `not available in this run (mode "plan")`},
		{ToolCall{Name: ToolView, Arguments: `{}`}, "missing required argument(s): path"},
		{ToolCall{Name: ToolView, Arguments: `[1]`}, "not a JSON object"},
	} {
		res := tb.dispatch(context.Background(), tc.call)
		if !res.format || !strings.Contains(res.output, tc.want) {
			t.Errorf("dispatch(%s %s) = %q, want a format error with %q", tc.call.Name, tc.call.Arguments, res.output, tc.want)
		}
	}
	if res := tb.dispatch(context.Background(), ToolCall{Name: ToolView, Arguments: `{"path":"a"}`}); res.isError {
		t.Errorf("view through the toolbox = %q", res.output)
	}
}
