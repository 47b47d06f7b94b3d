package worker_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/internal/workertest"
	"github.com/wrenchworks/wrench/task"
	"github.com/wrenchworks/wrench/worker"
)

// The environment tests run the real worker (mirrors, Docker, the egress
// proxy, environment snapshots, the scripted model) on repositories with
// real dependencies.

// realRepo clones a bundle of ../shared/realrepos, or skips (fails under
// CI=true) when the bundles are not there.
func realRepo(t *testing.T, bundle string) string {
	t.Helper()
	src := filepath.Join("..", "..", "shared", "realrepos", bundle)
	if _, err := os.Stat(src); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s is missing", src)
		}
		t.Skipf("%s is not here (the real repositories live beside the project); skipping", src)
	}
	dir := filepath.Join(t.TempDir(), strings.TrimSuffix(bundle, ".bundle"))
	gitRun(t, "", "clone", "-q", src, dir)
	return dir
}

// requireModuleProxy skips (fails under CI=true) when the Go module proxy
// cannot be reached from here.
func requireModuleProxy(t *testing.T) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("https://proxy.golang.org/github.com/google/uuid/@v/list")
	if err == nil {
		resp.Body.Close()
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and the Go module proxy is unreachable: %v", err)
	}
	t.Skipf("the Go module proxy is unreachable (%v); skipping", err)
}

func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// commitFiles writes files into the repository and commits them.
func commitFiles(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "commit", "-q", "-m", "test setup")
	return gitRun(t, dir, "rev-parse", "HEAD")
}

// run runs one task and collects its events.
func run(t *testing.T, w *worker.Worker, tk task.Task) (task.Report, []task.Event) {
	t.Helper()
	var events []task.Event
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep := w.Run(ctx, tk, 1, func(ev task.Event) { events = append(events, ev) })
	return rep, events
}

// breakAndRollBack is a script that writes a file breaking the package's
// tests (verification after the write rolls it back), then finishes.
func breakAndRollBack(t *testing.T, path, content string) string {
	return script(t, `  - tool_calls:
      - name: write
        arguments: {path: `+path+`, content: "`+content+`"}
  - tool_calls:
      - name: finish
        arguments: {summary: "nothing to change"}
`)
}

func afterWrite(c *worker.Config) { c.Verify = agent.VerifyAfterWrite }

func hasEvent(events []task.Event, kind task.EventKind, text string) bool {
	for _, ev := range events {
		if ev.Kind == kind && strings.Contains(ev.Text, text) {
			return true
		}
	}
	return false
}

// TestRealGoModule runs a task on spf13/cast (a module dependency, a go
// line newer than some images' Go): the default setup downloads the
// modules through the egress proxy, the baseline passes, a scripted change
// that breaks a test is rolled back, and the task resolves with no patch.
func TestRealGoModule(t *testing.T) {
	requireModuleProxy(t)
	repo := realRepo(t, "spf13-cast.bundle")
	w := workertest.New(t, &denv, workertest.Options{Mod: afterWrite})
	rep, events := run(t, w, task.Task{ID: "t-cast", Repo: task.Repo{URL: repo}, Instruction: "Look around.",
		TestCommand: "go test ./...", Model: breakAndRollBack(t, "zz_broken_test.go", `package cast\n\nimport \"testing\"\n\nfunc TestBroken(t *testing.T) { t.Fatal(\"broken\") }\n`)})
	res := rep.Result
	if res.Status != task.StateResolved || res.TestsBefore == nil || !res.TestsBefore.Passed || res.Patch != "" {
		t.Fatalf("result %s %q before %+v patch %q", res.Status, res.Reason, res.TestsBefore, res.Patch)
	}
	if res.Setup == nil || res.Setup.Snapshot != task.SnapshotMiss || !res.Setup.Passed || len(res.Setup.Egress) == 0 || res.Setup.Egress[0].Host != "proxy.golang.org:443" {
		t.Errorf("setup %+v", res.Setup)
	}
	if !hasEvent(events, task.EventRollback, "") {
		t.Error("the breaking write was not rolled back")
	}
	if !hasEvent(events, task.EventEgress, "egress allowed proxy.golang.org:443") {
		t.Error("no egress event for the module downloads")
	}
}

// itsdangerousTest runs the package's tests from its source tree.
const itsdangerousTest = "PYTHONPATH=src python3 -m pytest -q -p no:cacheprovider tests"

// TestRealPythonPackageFromDebian runs pallets/itsdangerous, whose tests
// need freezegun: without it the baseline fails; with a .wrench.yaml that
// installs Debian's python3-freezegun (as root, through the egress proxy)
// a new snapshot is built, the baseline passes and the task resolves.
func TestRealPythonPackageFromDebian(t *testing.T) {
	repo := realRepo(t, "pallets-itsdangerous.bundle")
	w := workertest.New(t, &denv, workertest.Options{Mod: afterWrite})
	commitFiles(t, repo, map[string]string{".wrench.yaml": "test: " + itsdangerousTest + "\n"})
	rep, _ := run(t, w, task.Task{ID: "t-itsd-1", Repo: task.Repo{URL: repo}, Instruction: "Look around.", Model: script(t, finishStep)})
	if b := rep.Result.TestsBefore; b == nil || b.Passed || !strings.Contains(b.Output, "freezegun") {
		t.Fatalf("without freezegun the baseline should fail on it: %+v", b)
	}
	commitFiles(t, repo, map[string]string{".wrench.yaml": "image:\n  packages: [python3-freezegun]\ntest: " + itsdangerousTest + "\n"})
	rep, _ = run(t, w, task.Task{ID: "t-itsd-2", Repo: task.Repo{URL: repo}, Instruction: "Look around.",
		Model: breakAndRollBack(t, "tests/test_zz_broken.py", `def test_broken():\n    assert False\n`)})
	res := rep.Result
	if res.Status != task.StateResolved || res.TestsBefore == nil || !res.TestsBefore.Passed || res.Patch != "" {
		t.Fatalf("with freezegun: %s %q before %+v patch %q", res.Status, res.Reason, res.TestsBefore, res.Patch)
	}
	if s := res.Setup; s == nil || s.Snapshot != task.SnapshotMiss || len(s.Commands) == 0 || !strings.Contains(s.Commands[0], "python3-freezegun") {
		t.Errorf("setup %+v", s)
	}
}

const finishStep = `  - tool_calls:
      - name: finish
        arguments: {summary: "done"}
`

// TestNewerGoToolchainAndModules is a module of our own whose go line is
// newer than the image's Go and that needs a third-party module: setup
// fetches the toolchain and the module through the egress proxy, the
// baseline runs (and fails on the bug), the scripted model fixes it,
// verification passes, and the patch applies to a fresh clone.
func TestNewerGoToolchainAndModules(t *testing.T) {
	requireModuleProxy(t)
	repo := filepath.Join(t.TempDir(), "ids")
	gitRun(t, "", "init", "-q", "-b", "main", repo)
	commitFiles(t, repo, map[string]string{
		"go.mod": "module example.com/ids\n\ngo 1.25.4\n\nrequire github.com/google/uuid v1.6.0\n",
		"go.sum": "github.com/google/uuid v1.6.0 h1:NIvaJDMOsjHA8n1jAhLSgzrAzy1Hgr+hNrb57e+94F0=\n" +
			"github.com/google/uuid v1.6.0/go.mod h1:TIyPZe4MgqvfeYDBFedMoGGpEw/LqOeaOT+nhxU+yHo=\n",
		"ids.go": "package ids\n\nimport \"github.com/google/uuid\"\n\n// Valid reports whether s is a UUID.\nfunc Valid(s string) bool {\n\t_, err := uuid.Parse(s)\n\treturn err != nil\n}\n",
		"ids_test.go": "package ids\n\nimport (\n\t\"runtime\"\n\t\"strings\"\n\t\"testing\"\n)\n\nfunc TestValid(t *testing.T) {\n" +
			"\tif !strings.HasPrefix(runtime.Version(), \"go1.25\") {\n\t\tt.Fatalf(\"built with %s, want the go line's toolchain\", runtime.Version())\n\t}\n" +
			"\tif !Valid(\"6ba7b810-9dad-11d1-80b4-00c04fd430c8\") || Valid(\"nope\") {\n\t\tt.Fatal(\"Valid is wrong\")\n\t}\n}\n",
	})
	fix := script(t, `  - tool_calls:
      - name: view
        arguments: {path: ids.go}
  - tool_calls:
      - name: edit
        arguments: {path: ids.go, old_string: "return err != nil", new_string: "return err == nil"}
  - tool_calls:
      - name: finish
        arguments: {summary: "Valid now reports success."}
`)
	w := workertest.New(t, &denv, workertest.Options{})
	rep, _ := run(t, w, task.Task{ID: "t-toolchain", Repo: task.Repo{URL: repo}, Instruction: "Fix Valid.", TestCommand: "go test ./...", Model: fix})
	res := rep.Result
	if res.Status != task.StateResolved || res.TestsBefore == nil || res.TestsBefore.Passed || !strings.Contains(res.TestsBefore.Output, "Valid is wrong") {
		t.Fatalf("result %s %q before %+v", res.Status, res.Reason, res.TestsBefore)
	}
	if !strings.Contains(res.Setup.Output, "go1.25.4") {
		t.Errorf("setup did not fetch the go line's toolchain:\n%s", res.Setup.Output)
	}
	check := filepath.Join(t.TempDir(), "check")
	gitRun(t, "", "clone", "-q", repo, check)
	cmd := exec.Command("git", "apply", "--check", "-")
	cmd.Dir, cmd.Stdin = check, strings.NewReader(res.Patch)
	if out, err := cmd.CombinedOutput(); err != nil || res.Patch == "" {
		t.Errorf("git apply --check: %v\n%s\n%s", err, out, res.Patch)
	}
}

// TestSetupTimeout ends a task whose setup outlives setup_timeout as
// setup_failed, the repository's fault, with the output so far.
func TestSetupTimeout(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "slow")
	gitRun(t, "", "init", "-q", "-b", "main", repo)
	commitFiles(t, repo, map[string]string{".wrench.yaml": "setup_timeout: 3s\nsetup:\n  - echo starting the long part\n  - sleep 60\n"})
	w := workertest.New(t, &denv, workertest.Options{})
	rep, _ := run(t, w, task.Task{ID: "t-slow-setup", Repo: task.Repo{URL: repo}, Instruction: "x", Model: script(t, finishStep)})
	res := rep.Result
	if res.Status != task.StateFailed || res.Fault != task.FaultSetup || rep.Retry || !strings.HasPrefix(res.Reason, task.ReasonSetupFailed) {
		t.Fatalf("result %s fault %s retry %v %q", res.Status, res.Fault, rep.Retry, res.Reason)
	}
	if res.Setup == nil || !res.Setup.TimedOut || !strings.Contains(res.Setup.Output, "starting the long part") {
		t.Errorf("setup %+v", res.Setup)
	}
}

// standIn is a loopback HTTP server on 127.0.0.2 (outside the sandbox's
// NO_PROXY), counting requests by path.
type standIn struct {
	addr string
	mu   sync.Mutex
	hits map[string]int
}

func newStandIn(t *testing.T) *standIn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 here: %v", err)
	}
	s := &standIn{addr: ln.Addr().String(), hits: map[string]int{}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		io.WriteString(w, "payload from the stand-in\n")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

func (s *standIn) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// TestSetupRunsOncePerEnvironment starts five tasks at once on one
// repository whose setup downloads a file through the egress proxy: setup
// runs once (one download, one miss, four hits), every task sees the file.
func TestSetupRunsOncePerEnvironment(t *testing.T) {
	dep := newStandIn(t)
	repo := filepath.Join(t.TempDir(), "dep")
	gitRun(t, "", "init", "-q", "-b", "main", repo)
	commitFiles(t, repo, map[string]string{
		".wrench.yaml": "egress: [\"" + dep.addr + "\"]\nsetup:\n  - curl -fsS http://" + dep.addr + "/dep.txt -o dep.txt\ntest: grep -q payload dep.txt\n",
		"README.md":    "a repository whose setup downloads its dependency\n",
	})
	w := workertest.New(t, &denv, workertest.Options{})
	var wg sync.WaitGroup
	reps := make([]task.Report, 5)
	for i := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			reps[i] = w.Run(ctx, task.Task{ID: fmt.Sprintf("t-once-%d", i), Repo: task.Repo{URL: repo}, Instruction: "x", Model: script(t, finishStep)}, 1, nil)
		}()
	}
	wg.Wait()
	misses := 0
	for _, rep := range reps {
		res := rep.Result
		if res.Status != task.StateResolved || res.TestsBefore == nil || !res.TestsBefore.Passed {
			t.Errorf("%s: %s %q before %+v", res.TaskID, res.Status, res.Reason, res.TestsBefore)
		}
		if res.Setup != nil && res.Setup.Snapshot == task.SnapshotMiss {
			misses++
		}
	}
	if misses != 1 || dep.count("/dep.txt") != 1 {
		t.Errorf("%d misses and %d downloads, want setup to run once", misses, dep.count("/dep.txt"))
	}
}

// TestAgentEgressDenied has the agent try to reach a host outside the
// agent phase's allowlist: the proxy refuses it and says why in the
// command's output, the refusal is an egress event of the task, and with
// the proxy variables unset nothing leaves the sandbox at all.
func TestAgentEgressDenied(t *testing.T) {
	host := newStandIn(t)
	repo := filepath.Join(t.TempDir(), "quiet")
	gitRun(t, "", "init", "-q", "-b", "main", repo)
	commitFiles(t, repo, map[string]string{"README.md": "nothing to set up\n"})
	probe := script(t, `  - tool_calls:
      - name: bash
        arguments: {command: "curl -sS http://`+host.addr+`/exfiltrate; echo; env -u http_proxy -u HTTP_PROXY -u https_proxy -u HTTPS_PROXY curl -sS --max-time 5 http://`+host.addr+`/direct; echo direct-exit=$?"}
  - expect_observation: "wrench egress"
    tool_calls:
      - name: finish
        arguments: {summary: "the network is closed"}
`)
	w := workertest.New(t, &denv, workertest.Options{})
	rep, events := run(t, w, task.Task{ID: "t-egress-denied", Repo: task.Repo{URL: repo}, Instruction: "x", Model: probe})
	if rep.Result.Status != task.StateResolved {
		t.Fatalf("result %s %q (the scripted model checks the proxy's explanation)", rep.Result.Status, rep.Result.Reason)
	}
	var denied, direct bool
	for _, ev := range events {
		if ev.Kind == task.EventEgress && ev.Egress != nil && !ev.Egress.Allowed && ev.Egress.Host == host.addr && ev.TaskID == "t-egress-denied" {
			denied = true
		}
		if ev.Kind == task.EventToolResult && strings.Contains(ev.Text, "direct-exit=") && !strings.Contains(ev.Text, "direct-exit=0") {
			direct = true
		}
	}
	if !denied {
		t.Error("no egress event of the denial")
	}
	if !direct {
		t.Error("without the proxy the direct request did not fail")
	}
	if n := host.count("/exfiltrate") + host.count("/direct"); n != 0 {
		t.Errorf("the host was reached %d times", n)
	}
}

// peakRSS is this process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			var kb int64
			fmt.Sscan(f[1], &kb)
			return kb << 10
		}
	}
	t.Skip("no VmHWM")
	return 0
}

// TestHugeFileStaysInTheSandbox has the agent write a 200 MB file beside a
// small change: the workspace lives in the sandbox, so the host never reads
// the file (the worker's peak memory barely moves), and the patch holds
// the small change and says the big file was left out.
func TestHugeFileStaysInTheSandbox(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "huge")
	gitRun(t, "", "init", "-q", "-b", "main", repo)
	commitFiles(t, repo, map[string]string{"README.md": "small\n"})
	w := workertest.New(t, &denv, workertest.Options{})
	before := peakRSS(t)
	rep, _ := run(t, w, task.Task{ID: "t-huge", Repo: task.Repo{URL: repo}, Instruction: "x", Model: script(t, `  - tool_calls:
      - name: bash
        arguments: {command: "head -c 200000000 /dev/urandom > huge.bin && echo changed >> README.md && echo done"}
`+finishStep)})
	grew := peakRSS(t) - before
	res := rep.Result
	if !strings.Contains(res.Patch, "+changed") || strings.Contains(res.Patch, "huge.bin") || !strings.Contains(res.Reason, "huge.bin") {
		t.Errorf("status %s reason %q patch:\n%.400s", res.Status, res.Reason, res.Patch)
	}
	t.Logf("the worker's peak memory grew by %d MB", grew>>20)
	if grew > 100<<20 {
		t.Errorf("the worker's peak memory grew by %d MB for a 200 MB file in the sandbox", grew>>20)
	}
}
