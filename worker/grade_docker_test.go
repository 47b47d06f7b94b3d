package worker_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/internal/workertest"
	"github.com/wrenchworks/wrench/sandbox/docker/dockertest"
	"github.com/wrenchworks/wrench/task"
	"github.com/wrenchworks/wrench/worker"
)

var denv dockertest.Env

func TestMain(m *testing.M) {
	code := m.Run()
	denv.Cleanup()
	os.Exit(code)
}

// marker is in the hidden test patch and nowhere else.
const marker = "HIDDEN_GRADING_MARKER_7f3a"

// gradeRepo is a Go module whose Add subtracts; TestMul passes.
func gradeRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":       "module example.com/calc\n\ngo 1.19\n",
		"calc.go":      "package calc\n\n// Add adds.\nfunc Add(a, b int) int { return a - b }\n\n// Mul multiplies.\nfunc Mul(a, b int) int { return a * b }\n",
		"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestMul(t *testing.T) {\n\tif Mul(2, 3) != 6 {\n\t\tt.Fatal(\"Mul\")\n\t}\n}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "base"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// testPatch adds TestAdd (fails at base) and carries the marker.
const testPatch = `diff --git a/calc_test.go b/calc_test.go
--- a/calc_test.go
+++ b/calc_test.go
@@ -7,3 +7,10 @@ func TestMul(t *testing.T) {
 		t.Fatal("Mul")
 	}
 }
+
+func TestAdd(t *testing.T) {
+	// ` + marker + `
+	if Add(2, 3) != 5 {
+		t.Fatal("Add")
+	}
+}
`

// snoop is a script step that searches the sandbox for the marker and the
// test patch's test, printing any line that holds them (the patterns are
// written so that the command itself holds neither).
const snoop = `{name: bash, arguments: {command: "grep -rIh -e 'HIDDEN_GRADING_MARKER_7f3[a]' -e 'TestAd[d]' /workspace /tmp /home /.wrench 2>/dev/null; env | grep -i -e gradin[g] -e 'MARKER_7f3[a]'; echo scanned"}}`

func newGradingWorker(t *testing.T) *worker.Worker {
	t.Helper()
	return workertest.New(t, &denv, workertest.Options{})
}

func script(t *testing.T, steps string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "script.yaml")
	if err := os.WriteFile(p, []byte("steps:\n"+steps), 0o644); err != nil {
		t.Fatal(err)
	}
	return "scripted:" + p
}

// TestGradingHiddenAndGraded runs the real worker (workspace, Docker
// sandbox, scripted model over HTTP) on tasks with a grading spec: the
// agent searches its sandbox and environment for the hidden test and finds
// nothing, and neither its trajectory, the events before the result nor the
// log hold it; after the agent, the test patch is applied and the two
// lists are run and recorded per test; the agent's patch leaves the test
// patch out.
func TestGradingHiddenAndGraded(t *testing.T) {
	fix := `  - tool_calls:
      - {name: view, arguments: {path: calc.go}}
  - tool_calls:
      - {name: edit, arguments: {path: calc.go, old_string: "return a - b", new_string: "return a + b"}}
`
	breakTests := `  - tool_calls:
      - {name: view, arguments: {path: calc_test.go}}
  - tool_calls:
      - {name: write, arguments: {path: calc_test.go, content: "package calc\n"}}
      - {name: write, arguments: {path: extra_test.go, content: "package calc\n\nimport \"testing\"\n\nfunc TestMul(t *testing.T) { t.Fatal(\"mine\") }\n"}}
`
	finish := "  - tool_calls:\n      - {name: finish, arguments: {summary: done}}\n"
	cases := []struct {
		name     string
		steps    string
		resolved bool
		f2p, p2p task.TestStatus
	}{
		{"fix", "  - tool_calls:\n      - " + snoop + "\n" + fix + finish, true, task.TestPassed, task.TestPassed},
		{"no change", "  - tool_calls:\n      - " + snoop + "\n" + finish, false, task.TestFailed, task.TestPassed},
		// The agent's edits to test files are undone before grading, but a
		// test file the test patch does not touch stays (and here breaks
		// the package's build: a duplicate TestMul).
		{"fix and rewrite tests", fix + breakTests + finish, false, task.TestMissing, task.TestMissing},
	}
	w := newGradingWorker(t)
	repo := gradeRepo(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk := task.Task{ID: "t-grade-" + strings.ReplaceAll(c.name, " ", "-"), Repo: task.Repo{URL: repo}, Instruction: "Add is wrong",
				Model: script(t, c.steps),
				Grading: &task.Grading{Run: "r1", Instance: "calc-1", Model: "scripted", TestPatch: testPatch,
					FailToPass: []string{"TestAdd"}, PassToPass: []string{"TestMul"},
					Tests: task.TestSelection{Framework: task.FrameworkGo, Files: []string{"calc_test.go"}}}}
			var events []task.Event
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			rep := w.Run(ctx, tk, 1, func(ev task.Event) { events = append(events, ev) })
			res := rep.Result
			g := res.Grade
			if g == nil {
				t.Fatalf("no grade: %+v", res)
			}
			if g.Error != "" || g.Resolved != c.resolved || len(g.FailToPass) != 1 || g.FailToPass[0].Status != c.f2p ||
				len(g.PassToPass) != 1 || g.PassToPass[0].Status != c.p2p {
				t.Fatalf("grade %s: %+v\n%s", g, g, g.Output)
			}
			if g.Run != "r1" || g.Instance != "calc-1" || res.Timings.Grade <= 0 {
				t.Errorf("grade labels %+v, timing %v", g, res.Timings.Grade)
			}
			if strings.Contains(res.Patch, marker) || strings.Contains(res.Patch, "TestAdd") {
				t.Errorf("the agent's patch holds the test patch:\n%s", res.Patch)
			}
			if c.resolved && !strings.Contains(res.Patch, "return a + b") {
				t.Errorf("patch lacks the fix:\n%s", res.Patch)
			}
			for _, ev := range events[:len(events)-1] {
				if b, _ := json.Marshal(ev); strings.Contains(string(b), marker) || strings.Contains(string(b), "TestAdd") {
					t.Errorf("event before the result holds the hidden test: %s", b)
				}
			}
			for _, name := range []string{"trajectory.jsonl", "log.txt"} {
				if strings.Contains(string(rep.Artifacts[name]), marker) {
					t.Errorf("%s holds the marker", name)
				}
			}
			if c.name != "fix and rewrite tests" && !strings.Contains(string(rep.Artifacts["trajectory.jsonl"]), "scanned") {
				t.Errorf("the snoop did not run: %s", rep.Artifacts["trajectory.jsonl"])
			}
		})
	}
}

// TestGradingErrors: a test patch that does not apply is the grading's
// error (not a failed test), and so is an unknown framework.
func TestGradingErrors(t *testing.T) {
	w := newGradingWorker(t)
	repo := gradeRepo(t)
	badPatch := strings.Replace(testPatch, `t.Fatal("Mul")`, `t.Fatal("Div")`, 1)
	tk := task.Task{ID: "t-grade-bad", Repo: task.Repo{URL: repo}, Instruction: "x",
		Model: script(t, "  - tool_calls:\n      - {name: finish, arguments: {summary: done}}\n"),
		Grading: &task.Grading{TestPatch: badPatch, FailToPass: []string{"TestAdd"},
			Tests: task.TestSelection{Framework: task.FrameworkGo, Files: []string{"calc_test.go"}}}}
	g := w.Run(context.Background(), tk, 1, nil).Result.Grade
	if g == nil || !strings.Contains(g.Error, "does not apply") || g.Resolved {
		t.Fatalf("grade %+v", g)
	}
}
