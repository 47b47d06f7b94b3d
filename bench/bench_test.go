package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/task"
)

func TestReadInstances(t *testing.T) {
	sw, err := ReadInstances("testdata/swebench.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(sw) != 1 {
		t.Fatalf("%d instances", len(sw))
	}
	in := sw[0]
	if !reflect.DeepEqual([]string(in.FailToPass), []string{"TestAdd"}) || len(in.PassToPass) != 2 || in.PassToPass[1] != "TestDiv/by_zero" {
		t.Errorf("lists %q %q", in.FailToPass, in.PassToPass)
	}
	if in.CloneURL() != "https://github.com/octo/calc" || in.Framework() != task.FrameworkGo || !reflect.DeepEqual(in.Files(), []string{"calc_test.go"}) {
		t.Errorf("clone %s framework %s files %v", in.CloneURL(), in.Framework(), in.Files())
	}
	if err := in.Validate(); err != nil {
		t.Error(err)
	}

	ours, err := ReadInstances("testdata/ours.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(ours) != 2 || ours[0].Framework() != task.FrameworkPytest || ours[1].Framework() != task.FrameworkGo ||
		ours[0].CloneURL() != "/src/r" || len(ours[1].PassToPass) != 0 {
		t.Fatalf("ours: %+v", ours)
	}
	if f := ours[1].Files(); !reflect.DeepEqual(f, []string{"old_test.go"}) {
		t.Errorf("files of a deletion: %v", f)
	}
	rename := "diff --git a/tests.py b/tests/test_x.py\nsimilarity index 100%\nrename from tests.py\nrename to tests/test_x.py\n"
	if f := PatchFiles(rename); !reflect.DeepEqual(f, []string{"tests/test_x.py"}) {
		t.Errorf("files of a pure rename: %v", f)
	}

	// Written back, the lists are JSON-encoded strings, as SWE-bench has them.
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, ours[:1]); err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(buf.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	if raw["FAIL_TO_PASS"] != `["tests/test_a.py::test_x"]` || raw["PASS_TO_PASS"] != `[]` {
		t.Errorf("written lists: %v %v", raw["FAIL_TO_PASS"], raw["PASS_TO_PASS"])
	}
}

func TestReadInstancesBad(t *testing.T) {
	for name, in := range map[string]string{
		"empty":         "  \n",
		"duplicate ids": `{"instance_id":"a"}` + "\n" + `{"instance_id":"a"}`,
		"bad line":      `{"instance_id":"a"}` + "\n{nope\n",
		"bad list":      `[{"instance_id":"a","FAIL_TO_PASS":"not a list"}]`,
		"list of ints":  `{"instance_id":"a","FAIL_TO_PASS":[1]}`,
	} {
		if _, err := DecodeInstances(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	bad := Instance{InstanceID: "x", Repo: "r", BaseCommit: "abc", ProblemStatement: "p", TestPatch: "diff --git a/README b/README\n+++ b/README\n", FailToPass: TestList{"t"}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "framework") {
		t.Errorf("no framework: %v", err)
	}
	bad.FailToPass = nil
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "FAIL_TO_PASS") {
		t.Errorf("no FAIL_TO_PASS: %v", err)
	}
	huge := Instance{InstanceID: "x", Repo: "r", BaseCommit: "abc", ProblemStatement: "p", FailToPass: TestList{"t"}, TestFramework: task.FrameworkGo,
		TestPatch: "diff --git a/a_test.go b/a_test.go\n--- a/a_test.go\n+++ b/a_test.go\n@@ -1 +1 @@\n-a\n+" + strings.Repeat("b", task.MaxTestPatchBytes) + "\n"}
	if err := huge.Validate(); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("huge test patch: %v", err)
	}
}

func TestDecodeResultsTornLastLine(t *testing.T) {
	good := `{"instance_id":"a","resolved":true}` + "\n" + `{"instance_id":"b","resolved":false}` + "\n"
	rs, err := DecodeResults(strings.NewReader(good + `{"instance_id":"c","reso`))
	if err != nil || len(rs) != 2 {
		t.Fatalf("torn last line: %v %v", rs, err)
	}
	if _, err := DecodeResults(strings.NewReader(`{"instance_id":"a"` + "\n" + good)); err == nil {
		t.Error("a bad line in the middle is not an error")
	}
}

func TestClassify(t *testing.T) {
	graded := &task.Grade{FailToPass: []task.TestOutcome{{Name: "T", Status: task.TestFailed}}}
	cases := []struct {
		name string
		res  task.Result
		want string
	}{
		{"resolved", task.Result{Status: task.StateResolved, Grade: &task.Grade{Resolved: true, FailToPass: []task.TestOutcome{{Name: "T", Status: task.TestPassed}}}}, FailureNone},
		{"tests say no", task.Result{Status: task.StateResolved, Grade: graded}, FailureModel},
		{"ran out of turns", task.Result{Status: task.StateUnresolved, Reason: "max_turns", Grade: graded}, FailureModel},
		{"model endpoint failed", task.Result{Status: task.StateFailed, Reason: "model_error: 500"}, FailureModel},
		{"image missing", task.Result{Status: task.StateFailed, Reason: "start sandbox: image_missing"}, FailureInfra},
		{"worker says setup", task.Result{Status: task.StateUnresolved, Fault: task.FaultSetup, Grade: graded}, FailureInfra},
		{"worker says model", task.Result{Status: task.StateFailed, Fault: task.FaultModel}, FailureModel},
		{"grading could not run", task.Result{Status: task.StateResolved, Grade: &task.Grade{Error: "the test patch does not apply"}}, FailureInfra},
		{"not graded", task.Result{Status: task.StateResolved}, FailureInfra},
		{"rejected", task.Result{Status: task.StateRejected, Reason: "clone: not found"}, FailureInfra},
		{"timed out", task.Result{Status: task.StateTimedOut, Grade: &task.Grade{Error: "not graded: the task was timed_out"}}, FailureModel},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ResultOf("i", "m", c.res).Failure; got != c.want {
				t.Errorf("failure %q, want %q", got, c.want)
			}
		})
	}
}

func TestReport(t *testing.T) {
	mk := func(id string, resolved bool, failure string, cost, secs float64) Result {
		return Result{InstanceID: id, Resolved: resolved, Failure: failure, CostUSD: cost, Seconds: secs, Turns: 2,
			Phases:     Phases{Agent: secs / 2, Grade: secs / 2},
			FailToPass: []task.TestOutcome{{Name: "T", Status: map[bool]task.TestStatus{true: task.TestPassed, false: task.TestFailed}[resolved]}}}
	}
	rs := []Result{mk("c", false, FailureInfra, 0, 1), mk("a", true, "", 0.5, 10), mk("b", false, FailureModel, 0.25, 4), mk("d", true, "", 0.25, 6)}
	r := NewReport("run1", "gpt", rs)
	if r.Instances != 4 || r.Resolved != 2 || r.ResolvedPct != 50 || r.InfraFailures != 1 || r.InfraFailureRate != 25 || r.ModelFailures != 1 {
		t.Errorf("counts %+v", r)
	}
	if r.CostPerResolved == nil || *r.CostPerResolved != 0.5 || r.MedianSeconds != 5 || r.MeanPhases.Agent != 2.625 {
		t.Errorf("cost per resolved %v median %v phases %+v", r.CostPerResolved, r.MedianSeconds, r.MeanPhases)
	}
	if r.Rows[0].InstanceID != "a" || r.Rows[0].FailToPass != "1/1" || r.Rows[1].FailToPass != "0/1" {
		t.Errorf("rows %+v", r.Rows)
	}
	// The order results arrive in does not change the report.
	r2 := NewReport("run1", "gpt", []Result{rs[3], rs[1], rs[0], rs[2]})
	if !reflect.DeepEqual(r, r2) {
		t.Error("report depends on the order of results")
	}
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 4 | 2 | 50.0 | 1.0000 | 0.5000 | 5.0s | 1 (25.0%) | 1 |", "| a | yes |", "| c | no | infrastructure |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	none := NewReport("r", "m", []Result{mk("x", false, FailureModel, 1, 1)})
	b, _ := json.Marshal(none)
	if none.CostPerResolved != nil || !strings.Contains(string(b), `"cost_per_resolved_usd":null`) {
		t.Errorf("no resolved: cost per resolved %s", b)
	}
}

func TestPairedDiffCI(t *testing.T) {
	cases := []struct {
		a, b, c, d int
		low, high  float64
	}{
		// Altman et al., "Statistics with Confidence" (2000), Table 6.2.
		{14, 5, 0, 22, 0.011483, 0.226493},
		{10, 3, 1, 6, -0.106623, 0.292264},
		{0, 0, 0, 10, -0.277533, 0.277533},
		{5, 0, 0, 0, -0.434482, 0.434482},
	}
	for _, c := range cases {
		low, high := PairedDiffCI(c.a, c.b, c.c, c.d, 1.959964)
		if math.Abs(low-c.low) > 1e-5 || math.Abs(high-c.high) > 1e-5 {
			t.Errorf("PairedDiffCI(%d,%d,%d,%d) = [%.6f, %.6f], want [%.6f, %.6f]", c.a, c.b, c.c, c.d, low, high, c.low, c.high)
		}
		// Swapping the two runs mirrors the interval.
		l2, h2 := PairedDiffCI(c.a, c.c, c.b, c.d, 1.959964)
		if math.Abs(l2+high) > 1e-9 || math.Abs(h2+low) > 1e-9 {
			t.Errorf("swapped (%d,%d,%d,%d): [%f, %f]", c.a, c.c, c.b, c.d, l2, h2)
		}
	}
	if l, h := PairedDiffCI(0, 30, 0, 0, 1.959964); h != 1 || l <= 0.8 {
		t.Errorf("all flips one way: [%f, %f]", l, h)
	}
}

func TestCompare(t *testing.T) {
	r := func(id string, ok bool) Result { return Result{InstanceID: id, Resolved: ok} }
	a := []Result{r("1", true), r("2", true), r("3", false), r("4", false), r("only-a", true)}
	b := []Result{r("4", true), r("3", false), r("2", false), r("1", true), r("only-b", false)}
	c := Compare("A", a, "B", b)
	if c.Paired != 4 || c.BothResolved != 1 || c.OnlyA != 1 || c.OnlyB != 1 || c.Neither != 1 || c.Diff != 0 {
		t.Errorf("table %+v", c)
	}
	if !reflect.DeepEqual(c.Fixed, []string{"4"}) || !reflect.DeepEqual(c.Broken, []string{"2"}) ||
		!reflect.DeepEqual(c.OnlyInA, []string{"only-a"}) || !reflect.DeepEqual(c.OnlyInB, []string{"only-b"}) {
		t.Errorf("flips %+v", c)
	}
	if c.Low >= 0 || c.High <= 0 {
		t.Errorf("CI [%f, %f] should straddle 0", c.Low, c.High)
	}
	var out bytes.Buffer
	_ = c.WriteText(&out)
	for _, want := range []string{"B - A: +0.0 points", "resolved by B only (A✗ → B✓) (1):\n  4", "resolved by A only (A✓ → B✗) (1):\n  2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
}

func TestResultOfPhases(t *testing.T) {
	res := task.Result{TaskID: "t", Status: task.StateResolved, Patch: "diff",
		Usage:   task.Usage{InputTokens: 100, OutputTokens: 20, CostUSD: 0.01, Turns: 3},
		Timings: task.Timings{Clone: time.Second, Setup: 2 * time.Second, Agent: 4 * time.Second, Grade: 2 * time.Second, Total: 10 * time.Second},
		Setup:   &task.SetupRun{Duration: time.Second},
		Grade:   &task.Grade{Resolved: true, FailToPass: []task.TestOutcome{{Name: "T", Status: task.TestPassed}}}}
	r := ResultOf("i", "gold", res)
	if !r.Resolved || r.Tokens != 120 || r.Turns != 3 || r.Phases.Setup != 3 || r.Phases.Agent != 4 || r.Phases.Grade != 2 || r.Phases.Other != 1 || r.Seconds != 10 || r.PatchBytes != 4 {
		t.Errorf("%+v", r)
	}
}
