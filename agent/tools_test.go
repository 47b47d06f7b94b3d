package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/sandbox"
)

// runTools runs one reply per call (then finish) and returns the outcome
// and the tool results, finish's excluded.
func runTools(t *testing.T, env *memenv.Env, cs ...agent.ToolCall) (*agent.Outcome, []string) {
	t.Helper()
	var replies []reply
	for _, c := range cs {
		replies = append(replies, calls(c))
	}
	replies = append(replies, finish("done"))
	r, _ := newRun(env, replies...)
	r.Task.TestCommand = ""
	out, err := agent.New(agent.Config{}).Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	res := toolResults(out.Messages)
	texts := make([]string, 0, len(res))
	for _, m := range res[:len(res)-1] {
		texts = append(texts, m.Content)
	}
	return out, texts
}

func view(p string) agent.ToolCall { return call("view", map[string]any{"path": p}) }

func edit(p, old, new string) agent.ToolCall {
	return call("edit", map[string]any{"path": p, "old_string": old, "new_string": new})
}

func TestTools(t *testing.T) {
	dup := "a := 1\nb := 2\na := 1\nc := 3\na := 1\n"
	long := strings.Repeat("line of text\n", 3000)
	tests := []struct {
		name  string
		files map[string]string
		calls []agent.ToolCall
		// want[i] are substrings of result i; "!" prefix: must not contain.
		want   [][]string
		files2 map[string]string // expected file contents afterwards ("" = must not exist)
	}{
		{
			name:  "view numbers lines and slices",
			files: map[string]string{"a.txt": "one\ntwo\nthree\nfour\n"},
			calls: []agent.ToolCall{call("view", map[string]any{"path": "a.txt", "offset": 2, "limit": 2})},
			want:  [][]string{{"     2\ttwo\n     3\tthree", "showing lines 2-3 of 4; view with offset=4", "!one"}},
		},
		{
			name:  "view absolute path under workspace",
			files: map[string]string{"d/a.txt": "x\n"},
			calls: []agent.ToolCall{view("/workspace/d/a.txt")},
			want:  [][]string{{"     1\tx"}},
		},
		{
			name:  "view refuses paths outside the workspace",
			calls: []agent.ToolCall{view("../etc/passwd"), view("/etc/passwd")},
			want:  [][]string{{"Error:", "outside the workspace"}, {"Error:", "outside the workspace"}},
		},
		{
			name:  "view missing file and binary file",
			files: map[string]string{"bin": "a\x00b"},
			calls: []agent.ToolCall{view("nope.go"), view("bin")},
			want:  [][]string{{"Error: view nope.go: no such file"}, {"binary file (3 bytes)"}},
		},
		{
			name:  "view stops at the output budget and says how to go on",
			files: map[string]string{"long.txt": long},
			calls: []agent.ToolCall{view("long.txt")},
			want:  [][]string{{"     1\tline of text", "of 3000; view with offset="}},
		},
		{
			name:  "ls marks directories and hides .git",
			files: map[string]string{"a.go": "", "pkg/b.go": "", ".git/HEAD": ""},
			calls: []agent.ToolCall{call("ls", map[string]any{})},
			want:  [][]string{{"a.go\npkg/", "!.git"}},
		},
		{
			name:  "glob with **",
			files: map[string]string{"a_test.go": "", "pkg/b_test.go": "", "pkg/b.go": ""},
			calls: []agent.ToolCall{call("glob", map[string]any{"pattern": "**/*_test.go"})},
			want:  [][]string{{"a_test.go\npkg/b_test.go", "!pkg/b.go"}},
		},
		{
			name:  "grep with include, no match, bad regexp",
			files: map[string]string{"a.go": "func Add() {}\n", "a.md": "func Add\n"},
			calls: []agent.ToolCall{
				call("grep", map[string]any{"pattern": "func \\w+", "include": "*.go"}),
				call("grep", map[string]any{"pattern": "zzz"}),
				call("grep", map[string]any{"pattern": "("}),
			},
			want: [][]string{{"a.go:1:func Add() {}", "!a.md"}, {"No matches"}, {"Error: invalid regular expression"}},
		},
		{
			name:   "edit creates a file with an empty old_string",
			calls:  []agent.ToolCall{edit("new/x.go", "", "package x\n")},
			want:   [][]string{{"Created new/x.go: +1 -0", "--- /dev/null", "+package x"}},
			files2: map[string]string{"new/x.go": "package x\n"},
		},
		{
			name:   "edit refuses to create over an existing file",
			files:  map[string]string{"x.go": "old\n"},
			calls:  []agent.ToolCall{edit("x.go", "", "new\n")},
			want:   [][]string{{"Error: x.go already exists"}},
			files2: map[string]string{"x.go": "old\n"},
		},
		{
			name:   "edit requires a view first",
			files:  map[string]string{"x.go": "old\n"},
			calls:  []agent.ToolCall{edit("x.go", "old", "new")},
			want:   [][]string{{"Error: x.go has not been read", "View it first"}},
			files2: map[string]string{"x.go": "old\n"},
		},
		{
			name:   "edit says how many matches and where",
			files:  map[string]string{"x.go": dup},
			calls:  []agent.ToolCall{view("x.go"), edit("x.go", "a := 1", "a := 9")},
			want:   [][]string{{"a := 1"}, {"Error: in x.go: old_string matches 3 times", "1, 3, 5"}},
			files2: map[string]string{"x.go": dup},
		},
		{
			name:   "edit not found",
			files:  map[string]string{"x.go": "abc\n"},
			calls:  []agent.ToolCall{view("x.go"), edit("x.go", "zzz", "y")},
			want:   [][]string{{"abc"}, {"Error: in x.go: old_string not found"}},
			files2: map[string]string{"x.go": "abc\n"},
		},
		{
			name:   "edit deletes text with an empty new_string, and edits twice after one view",
			files:  map[string]string{"x.go": "a\nb\nc\n"},
			calls:  []agent.ToolCall{view("x.go"), edit("x.go", "b\n", ""), edit("x.go", "c", "C")},
			want:   [][]string{{"b"}, {"Edited x.go: +0 -1", "-b"}, {"Edited x.go: +1 -1"}},
			files2: map[string]string{"x.go": "a\nC\n"},
		},
		{
			name:   "write creates without a view; no-op when unchanged",
			files:  map[string]string{"x.go": "same\n"},
			calls:  []agent.ToolCall{call("write", map[string]any{"path": "y.go", "content": "y\n"}), view("x.go"), call("write", map[string]any{"path": "x.go", "content": "same\n"})},
			want:   [][]string{{"Created y.go: +1 -0"}, {"same"}, {"No change: x.go already has this content."}},
			files2: map[string]string{"y.go": "y\n", "x.go": "same\n"},
		},
		{
			name:   "write requires a view of an existing file",
			files:  map[string]string{"x.go": "x\n"},
			calls:  []agent.ToolCall{call("write", map[string]any{"path": "x.go", "content": "y\n"})},
			want:   [][]string{{"Error: x.go has not been read"}},
			files2: map[string]string{"x.go": "x\n"},
		},
		{
			name:  "patch adds, updates and deletes; all or nothing",
			files: map[string]string{"a.txt": "one\ntwo\n", "b.txt": "bye\n"},
			calls: []agent.ToolCall{
				view("a.txt"), view("b.txt"),
				call("patch", map[string]any{"patch_text": "*** Begin Patch\n*** Add File: c.txt\n+new\n*** Update File: a.txt\n@@\n one\n-two\n+TWO\n*** Delete File: b.txt\n*** End Patch\n"}),
			},
			want:   [][]string{{"one"}, {"bye"}, {"Created c.txt: +1 -0", "Updated a.txt: +1 -1", "-two\n+TWO", "Deleted b.txt: +0 -1"}},
			files2: map[string]string{"a.txt": "one\nTWO\n", "b.txt": "", "c.txt": "new\n"},
		},
		{
			name:  "patch requires views and changes nothing otherwise",
			files: map[string]string{"a.txt": "one\n", "b.txt": "two\n"},
			calls: []agent.ToolCall{
				view("a.txt"),
				call("patch", map[string]any{"patch_text": "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n*** Update File: b.txt\n@@\n-two\n+TWO\n*** End Patch\n"}),
			},
			want:   [][]string{{"one"}, {"Error: b.txt has not been read", "Nothing was changed."}},
			files2: map[string]string{"a.txt": "one\n", "b.txt": "two\n"},
		},
		{
			name:   "patch refuses to add over an existing file",
			files:  map[string]string{"a.txt": "one\n"},
			calls:  []agent.ToolCall{call("patch", map[string]any{"patch_text": "*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch\n"})},
			want:   [][]string{{"Error:", "a.txt", "Nothing was changed."}},
			files2: map[string]string{"a.txt": "one\n"},
		},
		{
			name:  "search_replace applies blocks and reports a diff",
			files: map[string]string{"s.py": "def f():\n    return 1\n"},
			calls: []agent.ToolCall{
				view("s.py"),
				call("search_replace", map[string]any{"path": "s.py", "diff": "------- SEARCH\n    return 1\n=======\n    return 2\n+++++++ REPLACE\n"}),
				call("search_replace", map[string]any{"path": "s.py", "diff": "------- SEARCH\nnope\n=======\nx\n+++++++ REPLACE\n"}),
			},
			want:   [][]string{{"return 1"}, {"Edited s.py: +1 -1", "+    return 2"}, {"Error: s.py:", "Nothing was changed."}},
			files2: map[string]string{"s.py": "def f():\n    return 2\n"},
		},
		{
			name:   "search_replace requires a view",
			files:  map[string]string{"s.py": "x\n"},
			calls:  []agent.ToolCall{call("search_replace", map[string]any{"path": "s.py", "diff": "------- SEARCH\nx\n=======\ny\n+++++++ REPLACE\n"})},
			want:   [][]string{{"Error: s.py has not been read"}},
			files2: map[string]string{"s.py": "x\n"},
		},
		{
			name:  "bash reports exit code, class and output verbatim",
			calls: []agent.ToolCall{call("bash", map[string]any{"command": "echo hello"}), call("bash", map[string]any{"command": "nosuchtool --x"})},
			want:  [][]string{{"Exit code: 0\nhello"}, {"Exit code: 127 (error class: missing_dependency)", "bash: nosuchtool: command not found"}},
		},
		{
			name:  "bash timeout",
			calls: []agent.ToolCall{call("bash", map[string]any{"command": "sleep 30", "timeout_s": 0.01})},
			want:  [][]string{{"Command timed out after 10ms", "error class: timeout"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := memenv.New(tc.files)
			_, res := runTools(t, env, tc.calls...)
			if len(res) != len(tc.want) {
				t.Fatalf("%d results, want %d: %q", len(res), len(tc.want), res)
			}
			for i, subs := range tc.want {
				for _, sub := range subs {
					if neg, ok := strings.CutPrefix(sub, "!"); ok {
						if strings.Contains(res[i], neg) {
							t.Errorf("result %d contains %q:\n%s", i, neg, res[i])
						}
					} else if !strings.Contains(res[i], sub) {
						t.Errorf("result %d lacks %q:\n%s", i, sub, res[i])
					}
				}
			}
			for p, want := range tc.files2 {
				got, ok := env.File(p)
				if want == "" && ok {
					t.Errorf("%s exists: %q", p, got)
				} else if want != "" && got != want {
					t.Errorf("%s = %q, want %q", p, got, want)
				}
			}
		})
	}
}

func TestEditRefusesStaleFile(t *testing.T) {
	env := memenv.New(map[string]string{"x.go": "v1\n"})
	r, _ := newRun(env,
		calls(view("x.go")),
		reply{fn: func(ctx context.Context, req agent.ModelRequest, _ func(agent.StreamEvent)) (agent.ModelResponse, error) {
			env.SetFile("x.go", "v2\n") // another process changed it
			return calls(edit("x.go", "v", "w")).resp, nil
		}},
		calls(view("x.go"), edit("x.go", "v2", "v3")),
		finish("ok"),
	)
	r.Task.TestCommand = ""
	out, err := agent.New(agent.Config{}).Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	res := toolResults(out.Messages)
	if !strings.Contains(res[1].Content, "has changed since you last viewed it") {
		t.Errorf("stale edit: %q", res[1].Content)
	}
	if got, _ := env.File("x.go"); got != "v3\n" {
		t.Errorf("x.go = %q", got)
	}
}

func TestFileHistoryKeepsEveryVersion(t *testing.T) {
	env := memenv.New(map[string]string{"x.go": "a\n"})
	out, _ := runTools(t, env, view("x.go"), edit("x.go", "a", "b"), edit("x.go", "b", "c"), edit("n.go", "", "new\n"))
	h := out.FileHistory["x.go"]
	if len(h) != 2 || string(h[0].Before) != "a\n" || string(h[0].After) != "b\n" || string(h[1].Before) != "b\n" || string(h[1].After) != "c\n" {
		t.Errorf("x.go history = %+v", h)
	}
	if n := out.FileHistory["n.go"]; len(n) != 1 || n[0].Before != nil || string(n[0].After) != "new\n" || n[0].Tool != "edit" {
		t.Errorf("n.go history = %+v", n)
	}
}

func TestBashOutputKeepsHeadAndTail(t *testing.T) {
	env := memenv.New(nil)
	big := "HEAD" + strings.Repeat("x", 50_000) + "TAIL"
	env.Handle("big", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{Output: []byte(big)}, nil
	})
	_, res := runTools(t, env, call("bash", map[string]any{"command": "big"}))
	got := res[0]
	if !strings.Contains(got, "HEAD") || !strings.Contains(got, "TAIL") || !strings.Contains(got, "characters omitted") || !strings.Contains(got, "narrow the command") {
		t.Errorf("truncated output lacks head, tail or notice: %.200q…", got)
	}
	if len(got) < 10_000 || len(got) > 10_500 {
		t.Errorf("output is %d characters, want about 10,000 (the default)", len(got))
	}
}
