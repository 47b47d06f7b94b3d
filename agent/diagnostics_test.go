package agent_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

func TestDiagnosticsAfterWrites(t *testing.T) {
	env := memenv.New(map[string]string{"calc.go": calcGo, "my dir/x.py": "x = 1\n", "notes.md": "n\n", "gone.go": "package gone\n"})
	var checked []string
	env.Handle("check-go", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		checked = append(checked, req.Command)
		if src, _ := env.File("calc.go"); !strings.Contains(src, "return a + b") && !strings.Contains(src, "return a - b") {
			return sandbox.ExecResult{ExitCode: 2, Output: []byte("calc.go:4:13: expected operand, found newline\n")}, nil
		}
		return sandbox.ExecResult{}, nil
	})
	env.Handle("check-py", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		checked = append(checked, req.Command)
		return sandbox.ExecResult{ExitCode: 127, Output: []byte("bash: check-py: command not found\n")}, nil
	})
	cfg := agent.Config{Diagnostics: agent.DiagnosticsConfig{Commands: map[string]string{".go": "check-go {files}", ".py": "check-py {files}", ".md": ""}}}
	out, res := runToolsCfg(t, cfg, env,
		view("calc.go"), edit("calc.go", "a - b", "a +"), // broken: diagnosed
		edit("calc.go", "a +", "a + b"),                    // fixed: nothing to say
		view("my dir/x.py"), edit("my dir/x.py", "1", "2"), // checker missing: skipped from now on
		edit("my dir/x.py", "2", "3"),
		view("notes.md"), edit("notes.md", "n", "m"), // no checker for .md
		view("gone.go"), call("patch", map[string]any{"patch_text": "*** Begin Patch\n*** Delete File: gone.go\n*** End Patch\n"}),
	)
	if out.Reason != agent.StopFinished {
		t.Fatalf("reason %s", out.Reason)
	}
	if !strings.Contains(res[1], "Diagnostics for calc.go (exit code 2):\ncalc.go:4:13: expected operand") || !strings.Contains(res[1], "Fix these problems") {
		t.Errorf("broken edit lacks diagnostics:\n%s", res[1])
	}
	for _, i := range []int{2, 4, 5, 7, 9} {
		if strings.Contains(res[i], "Diagnostics") {
			t.Errorf("result %d has diagnostics:\n%s", i, res[i])
		}
	}
	want := []string{"check-go calc.go", "check-go calc.go", "check-py 'my dir/x.py'"}
	if strings.Join(checked, "|") != strings.Join(want, "|") {
		t.Errorf("checkers run: %q, want %q", checked, want)
	}
}

func TestDiagnosticsCanBeTurnedOff(t *testing.T) {
	env := memenv.New(map[string]string{"calc.go": calcGo})
	_, res := runToolsCfg(t, agent.Config{Diagnostics: agent.DiagnosticsConfig{Disabled: true}}, env, view("calc.go"), edit("calc.go", "a - b", "a +"))
	if len(env.Commands()) != 0 || strings.Contains(res[1], "Diagnostics") {
		t.Errorf("commands %q, result %q", env.Commands(), res[1])
	}
	// On by default: the built-in Go checker is asked for.
	env = memenv.New(map[string]string{"calc.go": calcGo})
	runToolsCfg(t, agent.Config{}, env, view("calc.go"), edit("calc.go", "a - b", "a + b"))
	if c := env.Commands(); len(c) != 1 || !strings.HasPrefix(c[0], "gofmt -e -l calc.go") {
		t.Errorf("default diagnostics ran %q", c)
	}
}

// TestDefaultDiagnosticsFindSyntaxErrors runs the built-in checkers with a
// real shell on real files: they must flag a syntax error, pass good code,
// and leave no file behind.
func TestDefaultDiagnosticsFindSyntaxErrors(t *testing.T) {
	for ext, tc := range map[string]struct{ tool, good, bad, says string }{
		".go": {"gofmt", "package p\n\nfunc F() int { return 1 }\n", "package p\n\nfunc F() int { return 1 +\n", "expected"},
		".py": {"python3", "def f():\n    return 1\n", "def f(:\n    return 1\n", "SyntaxError"},
	} {
		t.Run(ext, func(t *testing.T) {
			if _, err := exec.LookPath(tc.tool); err != nil {
				t.Skipf("%s is not installed", tc.tool)
			}
			dir := t.TempDir()
			for name, src := range map[string]string{"good" + ext: tc.good, "bad" + ext: tc.bad} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			run := func(file string) (int, string) {
				cmd := exec.Command("bash", "-c", strings.ReplaceAll(agent.DefaultDiagnostics()[ext], "{files}", file))
				cmd.Dir = dir
				out, err := cmd.CombinedOutput()
				if ee, ok := err.(*exec.ExitError); ok {
					return ee.ExitCode(), string(out)
				} else if err != nil {
					t.Fatal(err)
				}
				return 0, string(out)
			}
			if code, out := run("good" + ext); code != 0 || out != "" {
				t.Errorf("good file: exit %d, %q", code, out)
			}
			if code, out := run("bad" + ext); code == 0 || !strings.Contains(out, tc.says) || !strings.Contains(out, "bad"+ext) {
				t.Errorf("bad file: exit %d, %q", code, out)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 2 {
				t.Errorf("the checker left files behind: %v", entries)
			}
		})
	}
}

// runToolsCfg is runTools with a Config.
func runToolsCfg(t *testing.T, cfg agent.Config, env *memenv.Env, cs ...agent.ToolCall) (*agent.Outcome, []string) {
	t.Helper()
	var replies []reply
	for _, c := range cs {
		replies = append(replies, calls(c))
	}
	r, _ := newRun(env, append(replies, finish("done"))...)
	r.Task.TestCommand = ""
	out, err := agent.New(cfg).Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range toolResults(out.Messages) {
		texts = append(texts, m.Content)
	}
	return out, texts[:len(texts)-1]
}

// TestDiagnosticsInTheWritesResult checks that a search_replace whose
// result no longer parses reports the checker's complaint in its own tool
// result — for the model, in the tool_result event people watch, and in the
// trajectory's tool_result record — while replay still compares the raw
// output.
func TestDiagnosticsInTheWritesResult(t *testing.T) {
	src := "def f(x):\n    if x:\n        y = 1\n        return y\n    return 0\n"
	env := memenv.New(map[string]string{"m.py": src})
	env.Handle("check-py", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		got, _ := env.File("m.py")
		if strings.Contains(got, "\n                y = 2") {
			return sandbox.ExecResult{ExitCode: 1, Output: []byte("m.py:3:17: SyntaxError: unexpected indent\n")}, nil
		}
		return sandbox.ExecResult{}, nil
	})
	// SEARCH written without indentation, REPLACE with the file's: since
	// editformat keeps such a REPLACE as written the file stays valid; a
	// REPLACE indented twice over is what the checker must catch.
	diff := "------- SEARCH\ny = 1\nreturn y\n=======\n                y = 2\n        return y\n+++++++ REPLACE\n"
	r, _ := newRun(env, calls(view("m.py")), calls(call("search_replace", map[string]any{"path": "m.py", "diff": diff})), finish("done"))
	r.Task.TestCommand = ""
	var events []task.Event
	r.OnEvent = func(ev task.Event) { events = append(events, ev) }
	var traj strings.Builder
	r.Trajectory = &traj
	cfg := agent.Config{Diagnostics: agent.DiagnosticsConfig{Commands: map[string]string{".py": "check-py {files}"}}}
	out, err := agent.New(cfg).Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	const want = "Diagnostics for m.py (exit code 1):\nm.py:3:17: SyntaxError: unexpected indent"
	if res := toolResults(out.Messages); !strings.Contains(res[1].Content, want) {
		t.Errorf("the model was not told:\n%s", res[1].Content)
	}
	var shown []string
	for _, ev := range events {
		if ev.Kind == task.EventToolResult && ev.Tool == "search_replace" {
			shown = append(shown, ev.Text)
		}
	}
	if len(shown) != 1 || !strings.Contains(shown[0], want) {
		t.Errorf("tool_result event lacks the diagnostics: %q", shown)
	}
	recs, err := agent.ReadTrajectory(strings.NewReader(traj.String()))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rec := range recs {
		if rec.Kind == agent.RecordToolResult && rec.Call.Name == "search_replace" {
			found = true
			if !strings.Contains(rec.Display, want) || strings.Contains(rec.Output, "Diagnostics") {
				t.Errorf("trajectory tool_result: display %q, output %q", rec.Display, rec.Output)
			}
		}
	}
	if !found {
		t.Error("no search_replace tool_result in the trajectory")
	}
}
