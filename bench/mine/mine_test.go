package mine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/bench"
	"github.com/wrenchworks/wrench/github"
	"github.com/wrenchworks/wrench/github/githubtest"
	"github.com/wrenchworks/wrench/task"
)

// history builds a repository with one commit of each kind mining tells
// apart, and returns its dir and the commits by name.
type history struct {
	t    *testing.T
	dir  string
	shas map[string]string
	tick int
}

func newHistory(t *testing.T) *history {
	githubtest.RequireGit(t)
	h := &history{t: t, dir: t.TempDir(), shas: map[string]string{}}
	h.git("init", "-q", "-b", "main")
	return h
}

func (h *history) git(args ...string) string {
	h.t.Helper()
	h.tick++
	cmd := exec.Command("git", append([]string{"-C", h.dir, "-c", "user.name=t", "-c", "user.email=t@e"}, args...)...)
	date := time.Date(2024, 1, 1, 0, h.tick, 0, 0, time.UTC).Format(time.RFC3339)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date)
	out, err := cmd.CombinedOutput()
	if err != nil {
		h.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (h *history) commit(name, msg string, files map[string]string) {
	h.t.Helper()
	for p, body := range files {
		full := filepath.Join(h.dir, p)
		if body == "" {
			h.git("rm", "-q", p)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			h.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			h.t.Fatal(err)
		}
		h.git("add", p)
	}
	h.git("commit", "-qm", msg)
	h.shas[name] = h.git("rev-parse", "HEAD")
}

const calcGo = "package calc\n\n// Add adds.\nfunc Add(a, b int) int { return a - b }\n"

// build makes: root; fix (source+test); docs; tests-only; a pull request
// branch merged with a merge commit; a binary change; a squash merge.
func build(t *testing.T) *history {
	h := newHistory(t)
	h.commit("root", "initial", map[string]string{"go.mod": "module example.com/calc\n\ngo 1.19\n", "calc.go": calcGo,
		"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestMul(t *testing.T) {}\n"})
	h.commit("fix", "Fix Add\n\nAdd subtracted.", map[string]string{"calc.go": strings.Replace(calcGo, "a - b", "a + b", 1),
		"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestMul(t *testing.T) {}\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(Add(1, 2))\n\t}\n}\n",
		"CHANGES.md":   "- Add adds\n"})
	h.commit("docs", "Docs", map[string]string{"README.md": "# calc\n"})
	h.commit("testsonly", "More tests", map[string]string{"more_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestMore(t *testing.T) {}\n"})
	h.git("checkout", "-q", "-b", "feature")
	h.commit("pr", "Add Sub", map[string]string{"sub.go": "package calc\n\nfunc Sub(a, b int) int { return a - b }\n",
		"sub_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestSub(t *testing.T) {\n\tif Sub(3, 1) != 2 {\n\t\tt.Fatal()\n\t}\n}\n"})
	h.git("checkout", "-q", "main")
	h.git("merge", "-q", "--no-ff", "-m", "Merge pull request #102 from someone/feature\n\nAdd Sub", "feature")
	h.shas["merge"] = h.git("rev-parse", "HEAD")
	h.commit("binary", "Logo", map[string]string{"logo.bin": "\x00\x01\x02", "calc.go": calcGo + "\n// logo\n", "logo_test.go": "package calc\n"})
	h.commit("squash", "Mul by zero (#104)", map[string]string{"mul.go": "package calc\n\nfunc Mul(a, b int) int { return a * b }\n",
		"mul_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestMulZero(t *testing.T) {}\n"})
	return h
}

func TestMineCandidates(t *testing.T) {
	h := build(t)
	ins, rep, err := Mine(context.Background(), Config{Repo: h.dir, Name: "acme/calc"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range ins {
		got = append(got, in.Commit)
	}
	want := []string{h.shas["squash"], h.shas["pr"], h.shas["fix"]}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("candidates %v, want squash, pr, fix %v", got, want)
	}
	wantSkipped := map[string]int{SkipMerge: 1, SkipRoot: 1, SkipNoTests: 1, SkipNoSource: 1, SkipBinary: 1}
	if !reflect.DeepEqual(rep.Skipped, wantSkipped) || rep.Commits != 8 || rep.Candidates != 3 {
		t.Errorf("report %+v, want skipped %v of 8 commits", rep, wantSkipped)
	}
	fix := ins[2]
	if fix.InstanceID != "acme__calc-"+h.shas["fix"][:12] || fix.BaseCommit != h.shas["root"] || fix.Repo != "acme/calc" ||
		fix.RepoURL != h.dir || fix.ProblemStatement != "Fix Add\n\nAdd subtracted." || fix.ProblemSource != "commit" ||
		fix.TestFramework != task.FrameworkGo || fix.CreatedAt == "" {
		t.Errorf("fix instance %+v", fix)
	}
	if files := bench.PatchFiles(fix.Patch); !reflect.DeepEqual(files, []string{"CHANGES.md", "calc.go"}) {
		t.Errorf("gold patch files %v", files)
	}
	if files := bench.PatchFiles(fix.TestPatch); !reflect.DeepEqual(files, []string{"calc_test.go"}) {
		t.Errorf("test patch files %v", files)
	}
	// Both patches apply at the base, and together give the commit's tree.
	for _, in := range ins {
		wt := t.TempDir()
		h.git("worktree", "add", "-q", "--detach", wt, in.BaseCommit)
		for _, p := range []string{in.Patch, in.TestPatch} {
			cmd := exec.Command("git", "-C", wt, "apply", "--whitespace=nowarn", "-")
			cmd.Stdin = strings.NewReader(p)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: git apply: %v\n%s\n%s", in.InstanceID, err, out, p)
			}
		}
		exec.Command("git", "-C", wt, "add", "-A").Run()
		cmd := exec.Command("git", "-C", wt, "diff", "--cached", "--stat", in.Commit)
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("%s: patched tree differs from the commit: %v\n%s", in.InstanceID, err, out)
		}
	}
}

func TestMineLinkedIssues(t *testing.T) {
	h := build(t)
	gh := githubtest.New(t, "tok-123456")
	gh.AddRepo(t, "acme", "calc", map[string]string{"README.md": "x\n"})
	// Numbers are handed out in order: 101 the issue, 102 the merged pull
	// request (its body closes 101), 103 another issue, 104 the squash.
	issue := gh.AddIssue("acme", "calc", "Sub is missing", "I need a - b.")
	pr := gh.AddMergedPullRequest("acme", "calc", "Add Sub", "This resolves #101.")
	gh.AddIssue("acme", "calc", "unrelated", "")
	squash := gh.AddMergedPullRequest("acme", "calc", "Mul by zero", "no linked issue")
	if issue != 101 || pr != 102 || squash != 104 {
		t.Fatalf("numbers %d %d %d", issue, pr, squash)
	}
	c, err := github.NewClient(github.ClientConfig{BaseURL: gh.APIURL(), Token: "tok-123456", HTTPClient: gh.Client()})
	if err != nil {
		t.Fatal(err)
	}
	ins, _, err := Mine(context.Background(), Config{Repo: h.dir, Name: "acme/calc", Issues: GitHubIssues{Client: c, Owner: "acme", Repo: "calc"}})
	if err != nil {
		t.Fatal(err)
	}
	byCommit := map[string]bench.Instance{}
	for _, in := range ins {
		byCommit[in.Commit] = in
	}
	if in := byCommit[h.shas["pr"]]; in.ProblemStatement != "Sub is missing\n\nI need a - b." || in.ProblemSource != "issue" {
		t.Errorf("pull request commit: %q (%s)", in.ProblemStatement, in.ProblemSource)
	}
	if in := byCommit[h.shas["squash"]]; in.ProblemStatement != "Mul by zero (#104)" || in.ProblemSource != "commit" {
		t.Errorf("squash without a linked issue: %q (%s)", in.ProblemStatement, in.ProblemSource)
	}
	if in := byCommit[h.shas["fix"]]; in.ProblemSource != "commit" {
		t.Errorf("plain commit: %s", in.ProblemSource)
	}
}

// fakeValidator keeps the candidates of keep, slowly for the first one.
type fakeValidator struct {
	mu     sync.Mutex
	keep   map[string]bool
	slow   string
	called []string
}

func (f *fakeValidator) Validate(ctx context.Context, in *bench.Instance, base BaseFiles) (string, string, error) {
	f.mu.Lock()
	f.called = append(f.called, in.Commit)
	f.mu.Unlock()
	if in.Commit == f.slow {
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return "", "", ctx.Err()
		}
	}
	if _, err := base(in.BaseCommit, "calc.go"); err != nil {
		return DropInfra, err.Error(), nil
	}
	if !f.keep[in.Commit] {
		return DropNoF2P, "fake", nil
	}
	in.FailToPass = bench.TestList{"T"}
	return "", "", nil
}

func TestMineValidateOrderAndMax(t *testing.T) {
	h := build(t)
	for _, conc := range []int{1, 3} {
		v := &fakeValidator{keep: map[string]bool{h.shas["squash"]: true, h.shas["fix"]: true}, slow: h.shas["squash"]}
		ins, rep, err := Mine(context.Background(), Config{Repo: h.dir, Max: 1, Validator: v, Concurrency: conc})
		if err != nil {
			t.Fatal(err)
		}
		if len(ins) != 1 || ins[0].Commit != h.shas["squash"] || len(ins[0].FailToPass) != 1 || rep.Kept != 1 {
			t.Errorf("concurrency %d: kept %v (report %+v); want the newest valid one", conc, ins, rep)
		}
	}
	v := &fakeValidator{keep: map[string]bool{h.shas["fix"]: true}}
	ins, rep, err := Mine(context.Background(), Config{Repo: h.dir, Validator: v, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 1 || rep.Kept != 1 || rep.Dropped != 2 || rep.DropReasons[DropNoF2P] != 2 || len(rep.Outcomes) != 3 || rep.Outcomes[0].Commit != h.shas["squash"] {
		t.Errorf("kept %d, report %+v", len(ins), rep)
	}
}

func TestIsTestPath(t *testing.T) {
	for p, want := range map[string]bool{
		"calc_test.go": true, "internal/x/y_test.go": true, "testdata/in.txt": true, "pkg/testdata/a/b.json": true,
		"tests/test_x.py": true, "tests/conftest.py": true, "src/pkg/test_util.py": true, "tests/data/x.json": true,
		"calc.go": false, "src/pkg/util.py": false, "testing.go": false, "contest.py": false, "docs/tests.md": false,
	} {
		if got := IsTestPath(p); got != want {
			t.Errorf("IsTestPath(%q) = %v", p, got)
		}
	}
	if !IsCodePath("a/b.py") || IsCodePath("README.md") || IsCodePath("x_test.go") {
		t.Error("IsCodePath")
	}
}

func TestLists(t *testing.T) {
	o := func(n string, s task.TestStatus) task.TestOutcome { return task.TestOutcome{Name: n, Status: s} }
	before := []task.TestOutcome{o("A", task.TestPassed), o("B", task.TestFailed), o("D", task.TestPassed)}
	after := []task.TestOutcome{o("A", task.TestPassed), o("B", task.TestPassed), o("C", task.TestPassed), o("D", task.TestFailed), o("E", task.TestSkipped)}
	f2p, p2p, n := lists(before, after)
	if !reflect.DeepEqual(f2p, []string{"B", "C"}) || !reflect.DeepEqual(p2p, []string{"A"}) || n != 3 {
		t.Errorf("f2p %v p2p %v passed %d", f2p, p2p, n)
	}
}
