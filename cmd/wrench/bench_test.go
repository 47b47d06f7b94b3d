package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/bench"
	"github.com/wrenchworks/wrench/task"
)

// benchHistory is a Go module (standard library only) whose history holds
// four fixes with tests, one commit without tests and one whose new test
// passes without the fix.
func benchHistory(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "calc")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	commit := func(msg string, files map[string]string) {
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		git(t, dir, "add", "-A")
		git(t, dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", msg)
	}
	git(t, dir, "init", "-q", "-b", "main")
	calc := "package calc\n\n// Add adds.\nfunc Add(a, b int) int { return a - b }\n\n// Mul multiplies.\nfunc Mul(a, b int) int { return a + b }\n\n// Neg negates.\nfunc Neg(a int) int { return a }\n"
	tests := "package calc\n\nimport (\n\t\"fmt\"\n\t\"testing\"\n)\n\nvar _ = fmt.Sprint\n\nfunc TestAbs(t *testing.T) {}\n"
	commit("initial", map[string]string{"go.mod": "module example.com/calc\n\ngo 1.19\n", "calc.go": calc, "calc_test.go": tests})
	fix := func(msg, old, new, test string) {
		calc = strings.Replace(calc, old, new, 1)
		tests += test
		commit(msg, map[string]string{"calc.go": calc, "calc_test.go": tests})
	}
	fix("Add subtracts instead of adding", "a - b", "a + b", "\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(Add(2, 3))\n\t}\n}\n")
	commit("docs", map[string]string{"README.md": "# calc\n"})
	fix("Mul adds", "return a + b }\n\n// Neg", "return a * b }\n\n// Neg", "\nfunc TestMul(t *testing.T) {\n\tif Mul(2, 3) != 6 {\n\t\tt.Fatal(Mul(2, 3))\n\t}\n}\n")
	fix("Comment only, and a test that already passed", "// Add adds.", "// Add adds two ints.", "\nfunc TestAddZero(t *testing.T) {\n\tif Add(0, 0) != 0 {\n\t\tt.Fatal()\n\t}\n}\n")
	fix("Neg does nothing", "return a }", "return -a }", "\nfunc TestNeg(t *testing.T) {\n\tfor _, c := range []struct{ in, out int }{{1, -1}, {0, 0}} {\n\t\tt.Run(fmt.Sprint(c.in), func(t *testing.T) {\n\t\t\tif Neg(c.in) != c.out {\n\t\t\t\tt.Fatal()\n\t\t\t}\n\t\t})\n\t}\n}\n")
	commit("Sub", map[string]string{"calc.go": calc + "\n// Sub subtracts.\nfunc Sub(a, b int) int { return a - b }\n",
		"calc_test.go": tests + "\nfunc TestSub(t *testing.T) {\n\tif Sub(3, 1) != 2 {\n\t\tt.Fatal()\n\t}\n}\n"})
	return dir
}

// mineBench runs `wrench bench mine` on repo and returns the instances.
func mineBench(t testing.TB, ctx context.Context, deployment, repo string, extra ...string) (string, []bench.Instance, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "instances.jsonl")
	args := append([]string{"bench", "mine", "--repo", repo, "--out", out, "--deployment", deployment,
		"--data-dir", filepath.Join(t.TempDir(), "data")}, extra...)
	stdout, stderr, code := runWrench(t, ctx, nil, args...)
	if code != exitOK {
		t.Fatalf("bench mine: exit %d\n%s\n%s", code, stdout, stderr)
	}
	ins, err := bench.ReadInstances(out)
	if err != nil {
		t.Fatal(err)
	}
	return out, ins, stdout
}

// benchRun runs `wrench bench run` and returns the run dir and its report.
func benchRun(t testing.TB, ctx context.Context, deployment, instances, model string, extra ...string) (string, bench.Report) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run-"+model)
	args := append([]string{"bench", "run", "--instances", instances, "--model", model, "--out", dir, "--json", "--deployment", deployment}, extra...)
	stdout, stderr, code := runWrench(t, ctx, nil, args...)
	if code != exitOK {
		t.Fatalf("bench run --model %s: exit %d\n%s\n%s", model, code, stdout, stderr)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, stdout)
	}
	return dir, rep
}

// TestBenchMineRunCompare mines a history, then runs the oracles through
// the in-process server: gold resolves every instance, empty and wrong
// none (the model's failures), a broken image none (the infrastructure's);
// compare reports the flips; predictions.jsonl has SWE-bench's schema.
func TestBenchMineRunCompare(t *testing.T) {
	requireImage(t)
	deployment := testDeployment("bench")
	t.Cleanup(func() { removeContainers(deployment) })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	repo := benchHistory(t)

	file, ins, summary := mineBench(t, ctx, deployment, repo, "--name", "acme/calc", "--concurrency", "2")
	if len(ins) != 4 {
		t.Fatalf("mined %d instances, want 4:\n%s", len(ins), summary)
	}
	for _, want := range []string{"7 commits walked, 5 candidates, 4 kept, 1 dropped", "dropped   1: no FAIL_TO_PASS test", "skipped   1: no test file changed", "skipped   1: root commit"} {
		if !strings.Contains(summary, want) {
			t.Errorf("mine summary lacks %q:\n%s", want, summary)
		}
	}
	lists := map[string][2]int{}
	for _, in := range ins {
		lists[strings.SplitN(in.ProblemStatement, "\n", 2)[0]] = [2]int{len(in.FailToPass), len(in.PassToPass)}
		if strings.Contains(in.Patch, "_test.go") || !strings.Contains(in.TestPatch, "_test.go") {
			t.Errorf("%s: patch/test patch split wrong", in.InstanceID)
		}
	}
	// Neg: TestNeg and its subtest TestNeg/1 fail before, TestNeg/0
	// passes before; Sub: without Sub the package does not build, so every
	// test of it is FAIL_TO_PASS.
	want := map[string][2]int{"Add subtracts instead of adding": {1, 1}, "Mul adds": {1, 2}, "Neg does nothing": {2, 5}, "Sub": {8, 0}}
	if !reflect.DeepEqual(lists, want) {
		t.Errorf("FAIL_TO_PASS/PASS_TO_PASS sizes %v, want %v", lists, want)
	}

	goldDir, gold := benchRun(t, ctx, deployment, file, "gold", "--concurrency", "2", "--test-command", "go test ./...")
	emptyDir, empty := benchRun(t, ctx, deployment, file, "empty", "--concurrency", "2")
	_, wrong := benchRun(t, ctx, deployment, file, "wrong", "--concurrency", "2")
	// An image the policy allows that is not there: the sandbox cannot
	// start, which is the infrastructure's failure.
	_, broken := benchRun(t, ctx, deployment, file, "gold", "--image", "wrench-sandbox:test-bench-missing")
	for _, row := range broken.Rows {
		if !strings.Contains(row.Reason, "image_missing") {
			t.Errorf("broken image: %s failed for %q, want image_missing", row.InstanceID, row.Reason)
		}
	}
	check := func(name string, r bench.Report, resolved, model, infra int) {
		t.Helper()
		if r.Instances != 4 || r.Resolved != resolved || r.ModelFailures != model || r.InfraFailures != infra {
			t.Errorf("%s: %d instances, %d resolved, %d model and %d infrastructure failures; want 4, %d, %d, %d\n%+v",
				name, r.Instances, r.Resolved, r.ModelFailures, r.InfraFailures, resolved, model, infra, r.Rows)
		}
	}
	check("gold", gold, 4, 0, 0)
	check("empty", empty, 0, 4, 0)
	check("wrong", wrong, 0, 4, 0)
	check("broken image", broken, 0, 0, 4)
	if gold.ResolvedPct != 100 || empty.ResolvedPct != 0 || broken.InfraFailureRate != 100 || gold.MeanPhases.Baseline <= 0 || gold.MeanPhases.Grade <= 0 {
		t.Errorf("rates: gold %.0f%% empty %.0f%% broken infra %.0f%%; gold phases %+v", gold.ResolvedPct, empty.ResolvedPct, broken.InfraFailureRate, gold.MeanPhases)
	}

	checkPredictions(t, filepath.Join(goldDir, "predictions.jsonl"), ins)

	stdout, stderr, code := runWrench(t, ctx, nil, "bench", "compare", "--json", goldDir, emptyDir)
	if code != exitOK {
		t.Fatalf("compare: %d %s", code, stderr)
	}
	var c bench.Comparison
	if err := json.Unmarshal([]byte(stdout), &c); err != nil {
		t.Fatal(err)
	}
	if c.Paired != 4 || c.OnlyA != 4 || len(c.Broken) != 4 || c.Diff != -1 || c.High >= 0 || c.Low < -1 {
		t.Errorf("gold vs empty: %+v", c)
	}
}

// checkPredictions reads predictions.jsonl back against the schema the
// SWE-bench harness documents for a predictions file: one object per
// line with instance_id (string), model_name_or_path (string) and
// model_patch (string), and nothing else; one per instance.
func checkPredictions(t *testing.T, file string, ins []bench.Instance) {
	t.Helper()
	schema := map[string]string{"instance_id": "string", "model_name_or_path": "string", "model_patch": "string"}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var obj map[string]any
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		if err := dec.Decode(&obj); err != nil || dec.More() {
			t.Fatalf("line is not one JSON object: %v: %.200s", err, sc.Text())
		}
		for k, typ := range schema {
			v, ok := obj[k]
			if !ok {
				t.Errorf("prediction lacks %s: %.200s", k, sc.Text())
				continue
			}
			if got := fmt.Sprintf("%T", v); (typ == "string") != (got == "string") {
				t.Errorf("%s is %s, want %s", k, got, typ)
			}
		}
		for k := range obj {
			if _, ok := schema[k]; !ok {
				t.Errorf("prediction has unknown field %s", k)
			}
		}
		id, _ := obj["instance_id"].(string)
		patch, _ := obj["model_patch"].(string)
		seen[id] = true
		if obj["model_name_or_path"] != "gold" || !strings.HasPrefix(patch, "diff --git ") {
			t.Errorf("%s: model %v, patch %.80q", id, obj["model_name_or_path"], patch)
		}
	}
	if len(seen) != len(ins) {
		t.Errorf("%d predictions for %d instances", len(seen), len(ins))
	}
}

// TestBenchResumeAfterKill kills a bench run (SIGKILL: the in-process
// server and its worker die with it) once some instances have finished,
// and resumes it: every instance has one result, those finished before the
// kill are not run again, and the report equals an uninterrupted run's
// but for the times.
func TestBenchResumeAfterKill(t *testing.T) {
	requireImage(t)
	deployment := testDeployment("bench-resume")
	t.Cleanup(func() { removeContainers(deployment) })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	file, ins, _ := mineBench(t, ctx, deployment, benchHistory(t), "--confirm=false")
	if len(ins) != 4 {
		t.Fatalf("mined %d instances", len(ins))
	}
	_, whole := benchRun(t, ctx, deployment, file, "gold")

	dir := filepath.Join(t.TempDir(), "run-gold")
	args := []string{"bench", "run", "--instances", file, "--model", "gold", "--out", dir, "--name", "run-gold", "--json", "--deployment", deployment}
	p := startProc(t, "bench run", args...)
	results := filepath.Join(dir, "results.jsonl")
	var before []string
	for deadline := time.Now().Add(5 * time.Minute); ; {
		data, _ := os.ReadFile(results)
		if lines := strings.Count(string(data), "\n"); lines >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no results after 5 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	data, _ := os.ReadFile(results)
	before = strings.SplitAfter(string(data), "\n")
	if strings.Count(string(data), "\n") >= len(ins) {
		t.Fatalf("the run finished before the kill:\n%s", data)
	}

	if _, _, code := runWrench(t, ctx, nil, args...); code != exitBadInput {
		t.Errorf("rerun without --resume: exit %d, want %d", code, exitBadInput)
	}
	stdout, stderr, code := runWrench(t, ctx, nil, append(args, "--resume")...)
	if code != exitOK {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	after, _ := os.ReadFile(results)
	if !strings.HasPrefix(string(after), strings.Join(before, "")) {
		t.Errorf("results before the kill were rewritten")
	}
	rs, err := bench.ReadResults(results)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range rs {
		count[r.InstanceID]++
		if r.Attempt > 2 {
			t.Errorf("%s ran %d times", r.InstanceID, r.Attempt)
		}
	}
	for _, in := range ins {
		if count[in.InstanceID] != 1 {
			t.Errorf("%s has %d results", in.InstanceID, count[in.InstanceID])
		}
	}
	var resumed bench.Report
	if err := json.Unmarshal([]byte(stdout), &resumed); err != nil {
		t.Fatal(err)
	}
	if a, b := withoutTimes(whole), withoutTimes(resumed); !reflect.DeepEqual(a, b) {
		t.Errorf("resumed report differs from the uninterrupted one:\n%+v\n%+v", a, b)
	}
	if left := containersOf(t, deployment); left != 0 {
		t.Errorf("%d containers left", left)
	}
}

// withoutTimes is r with its wall-clock figures zeroed: two runs of the
// same instances agree on everything else.
func withoutTimes(r bench.Report) bench.Report {
	r.MedianSeconds, r.MeanPhases = 0, bench.Phases{}
	rows := append([]bench.Row(nil), r.Rows...)
	for i := range rows {
		rows[i].Seconds = 0
	}
	r.Rows = rows
	return r
}

// realRepos is the directory of real repositories for tests:
// $WRENCH_REALREPOS, else shared/realrepos beside the checkout (../shared
// from the repository root, or one level further up from a worktree).
func realRepos(t *testing.T) string {
	if d := os.Getenv("WRENCH_REALREPOS"); d != "" {
		return d
	}
	root := moduleRoot(t)
	for _, up := range []string{"..", filepath.Join("..", "..")} {
		d := filepath.Join(root, up, "shared", "realrepos")
		if _, err := os.Stat(d); err == nil {
			return d
		}
	}
	return filepath.Join(root, "..", "shared", "realrepos")
}

// hostCABundle is the CA bundle sandboxes trust: $WRENCH_SANDBOX_CA, else
// the host's own.
func hostCABundle(t *testing.T) string {
	for _, p := range []string{os.Getenv("WRENCH_SANDBOX_CA"), "/etc/ssl/certs/ca-certificates.crt"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	t.Fatal("no CA bundle: set WRENCH_SANDBOX_CA")
	return ""
}

// TestBenchRealRepos mines the real histories in ../shared/realrepos — a
// Go module whose tests need a module from the module proxy (the
// environment's setup downloads it through the egress proxy), and a Python
// package tested with pytest — and runs the gold and empty oracles on what
// was kept. Sandboxes trust the host's CA bundle, as the host's own path
// to the network may re-sign TLS.
func TestBenchRealRepos(t *testing.T) {
	requireImage(t)
	for _, c := range []struct {
		bundle, name string
		max          string
	}{
		// Newest first: cast's first two candidates are kept, itsdangerous's
		// first is dropped (its new tests pass without the fix) and its second
		// kept, so the test validates few candidates (each costs minutes when
		// its environment is new). Every candidate of both histories is
		// mined, without running tests, by bench/mine's
		// TestGoldScriptsOnRealHistories; docs/benchmarks.md times a gold
		// run on all twelve validated itsdangerous instances.
		{"spf13-cast.bundle", "spf13/cast", "2"},
		{"pallets-itsdangerous.bundle", "pallets/itsdangerous", "1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bundle := filepath.Join(realRepos(t), c.bundle)
			if _, err := os.Stat(bundle); err != nil {
				if os.Getenv("CI") == "true" {
					t.Fatalf("CI=true and %s is missing", bundle)
				}
				t.Skipf("%s is absent; skipping", bundle)
			}
			repo := filepath.Join(t.TempDir(), "repo")
			if out, err := exec.Command("git", "clone", "-q", bundle, repo).CombinedOutput(); err != nil {
				t.Fatalf("clone: %v\n%s", err, out)
			}
			deployment := testDeployment("bench-real")
			t.Cleanup(func() { removeContainers(deployment) })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			t0 := time.Now()
			ca := []string{"--sandbox-ca", hostCABundle(t)}
			file, ins, summary := mineBench(t, ctx, deployment, repo, append([]string{"--name", c.name, "--max", c.max, "--concurrency", "2"}, ca...)...)
			t.Logf("mined in %s:\n%s", time.Since(t0).Round(time.Second), summary)
			if len(ins) == 0 {
				t.Fatalf("no instance kept")
			}
			_, gold := benchRun(t, ctx, deployment, file, "gold", append([]string{"--concurrency", "2"}, ca...)...)
			_, empty := benchRun(t, ctx, deployment, file, "empty", append([]string{"--concurrency", "2"}, ca...)...)
			if gold.ResolvedPct != 100 || empty.Resolved != 0 || empty.ModelFailures != empty.Instances {
				t.Errorf("gold %.0f%% resolved, empty %d resolved (%d model failures of %d)", gold.ResolvedPct, empty.Resolved, empty.ModelFailures, empty.Instances)
			}
		})
	}
}

// TestBenchRunThroughServer runs a bench through a `wrench serve` that is
// already running (--server): the tasks are that server's, labelled bench.
func TestBenchRunThroughServer(t *testing.T) {
	requireImage(t)
	deployment := testDeployment("bench-server")
	t.Cleanup(func() { removeContainers(deployment) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	file, ins, _ := mineBench(t, ctx, deployment, benchHistory(t), "--max", "2", "--confirm=false")
	if len(ins) != 2 {
		t.Fatalf("mined %d", len(ins))
	}
	srv, apiURL, _, _ := startServeProc(t, ctx, "--slots", "2", "--data-dir", t.TempDir(), "--deployment", deployment, "--max-body", "4194304")
	dir, rep := benchRun(t, ctx, deployment, file, "gold", "--server", apiURL, "--concurrency", "2")
	if rep.Resolved != 2 {
		t.Fatalf("gold through the server: %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(dir, "server")); err == nil {
		t.Error("a server was started in process although --server was given")
	}
	rs, _ := bench.ReadResults(filepath.Join(dir, "results.jsonl"))
	for _, r := range rs {
		out, errOut, code := runWrench(t, ctx, []string{"WRENCH_SERVER=" + apiURL}, "status", "--json", r.TaskID)
		var st task.Status
		if err := json.Unmarshal([]byte(out), &st); code != exitOK || err != nil || st.Task == nil || st.Task.Source.Kind != "bench" ||
			st.Result == nil || st.Result.Grade == nil || !st.Result.Grade.Resolved {
			t.Errorf("wrench status %s: %d %v %s %s", r.TaskID, code, err, out, errOut)
		}
	}
	if err := srv.stop(t); err != nil {
		t.Errorf("serve on SIGTERM: %v", err)
	}
}
