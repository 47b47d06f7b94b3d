package github_test

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/github"
	"github.com/wrenchworks/wrench/github/githubtest"
	"github.com/wrenchworks/wrench/task"
)

// testToken is the stand-in's token; tests grep for it in everything
// Wrench writes.
const testToken = "ghs_TESTtoken0123456789abcdefSECRET"

// calcGo is the fixture repository's only source file.
const calcGo = "package calc\n\nfunc Add(a, b int) int {\n\treturn a - b\n}\n"

// fixture is a stand-in GitHub with one repository, and a publisher for it.
type fixture struct {
	gh   *githubtest.Server
	repo githubtest.Repo
	pub  *github.Publisher
	cfg  github.PublisherConfig
	log  *bytes.Buffer
}

func newFixture(t testing.TB, mod func(*github.PublisherConfig)) *fixture {
	t.Helper()
	gh := githubtest.New(t, testToken)
	repo := gh.AddRepo(t, "acme", "calc", map[string]string{"calc.go": calcGo, "README.md": "# calc\n"})
	var logBuf bytes.Buffer
	cfg := github.PublisherConfig{
		Token:      testToken,
		APIURL:     gh.APIURL(),
		WebURL:     gh.URL(),
		HTTPClient: gh.Client(),
		CABundle:   gh.CA(),
		TaskURL:    func(id string) string { return "https://wrench.example.com/v1/tasks/" + id },
		Logger:     slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mod != nil {
		mod(&cfg)
	}
	pub, err := github.NewPublisher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{gh: gh, repo: repo, pub: pub, cfg: cfg, log: &logBuf}
}

// task returns a GitHub task for issue n of the fixture's repository, as
// the webhook makes it.
func (f *fixture) task(id string, n int) task.Task {
	return task.Task{
		ID:          id,
		Repo:        task.Repo{URL: f.repo.CloneURL, Ref: "main"},
		Instruction: "Add subtracts instead of adding\n\nAdd(2, 2) returns 0.",
		Output:      task.Output{PullRequest: &task.PullRequest{Base: "main"}},
		Source:      task.Source{Kind: "github", Delivery: "d-" + id, Issue: f.repo.FullName() + "#" + itoa(n)},
	}
}

// result is a resolved result whose patch fixes Add, on the fixture's
// first commit.
func (f *fixture) result(t testing.TB, id string) task.Result {
	t.Helper()
	return task.Result{
		TaskID:     id,
		Status:     task.StateResolved,
		Reason:     "finished",
		Summary:    "Fix Add to add.\n\nAdd used subtraction; it now adds its operands.",
		Patch:      makePatch(t, f.repo, map[string]string{"calc.go": strings.Replace(calcGo, "a - b", "a + b", 1)}),
		BaseCommit: f.repo.Head,
		TestsBefore: &task.TestRun{Command: "go test ./...", ExitCode: 1, Duration: 1200 * time.Millisecond,
			Output: "--- FAIL: TestAdd (0.00s)\n    --- FAIL: TestAdd/negative (0.00s)\n--- PASS: TestSub (0.00s)\nFAIL\n"},
		TestsAfter: &task.TestRun{Command: "go test ./...", Passed: true, Duration: 900 * time.Millisecond,
			Output: "ok  \tcalc\t0.01s\n"},
		Setup:      &task.SetupRun{Snapshot: task.SnapshotHit, Key: "env-3f9a", Passed: true},
		Artifacts:  []string{"patch.diff", "trajectory.jsonl", "log.txt"},
		Usage:      task.Usage{InputTokens: 12000, OutputTokens: 800, CostUSD: 0.0312, Turns: 4, ToolCalls: 6},
		Timings:    task.Timings{Total: 95 * time.Second},
		FinishedAt: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
	}
}

// makePatch returns the git patch that turns repo's default branch into
// one with files written, as `git diff` makes it.
func makePatch(t testing.TB, repo githubtest.Repo, files map[string]string) string {
	t.Helper()
	return makePatchAt(t, repo, repo.DefaultBranch, files)
}

// makePatchAt is makePatch on branch.
func makePatchAt(t testing.TB, repo githubtest.Repo, branch string, files map[string]string) string {
	t.Helper()
	work := filepath.Join(t.TempDir(), "w")
	git(t, "", "clone", "-q", "-b", branch, repo.Dir, work)
	for p, c := range files {
		if err := os.WriteFile(filepath.Join(work, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, work, "add", "-A")
	return git(t, work, "diff", "--cached", "--binary", "--full-index")
}

func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

func itoa(n int) string { return strconv.Itoa(n) }
