package task

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func valid() Task {
	return Task{Repo: Repo{URL: "/src/repo"}, Instruction: "fix it"}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Task)
		fields []string // fields at fault; none means valid
	}{
		{"minimal", func(*Task) {}, nil},
		{"https", func(t *Task) { t.Repo.URL = "https://example.com/r.git" }, nil},
		{"file url", func(t *Task) { t.Repo.URL = "file:///src/r" }, nil},
		{"missing repo", func(t *Task) { t.Repo.URL = "" }, []string{"repo.url"}},
		{"ssh scheme", func(t *Task) { t.Repo.URL = "ssh://git@host/r" }, []string{"repo.url"}},
		{"empty instruction", func(t *Task) { t.Instruction = "  \n" }, []string{"instruction"}},
		{"huge instruction", func(t *Task) { t.Instruction = strings.Repeat("x", MaxInstructionBytes+1) }, []string{"instruction"}},
		{"bad id", func(t *Task) { t.ID = "../etc" }, []string{"id"}},
		{"bad ref", func(t *Task) { t.Repo.Ref = "main branch" }, []string{"repo.ref"}},
		{"bad commit", func(t *Task) { t.Repo.Commit = "xyz" }, []string{"repo.commit"}},
		{"turns too low", func(t *Task) { t.Limits.MaxTurns = -2 }, []string{"limits.max_turns"}},
		{"turns unlimited", func(t *Task) { t.Limits.MaxTurns = -1 }, nil},
		{"negative cost", func(t *Task) { t.Limits.MaxCostUSD = -1 }, []string{"limits.max_cost_usd"}},
		{"timeout too long", func(t *Task) { t.Limits.Timeout = Duration(48 * time.Hour) }, []string{"limits.timeout"}},
		{"network", func(t *Task) { t.Sandbox.Network = "host" }, []string{"sandbox.network"}},
		{"tiny memory", func(t *Task) { t.Sandbox.MemoryMB = 8 }, []string{"sandbox.memory_mb"}},
		{"protocol", func(t *Task) { t.Protocol = "xml" }, []string{"protocol"}},
		{"plan mode", func(t *Task) { t.Mode = "plan"; t.AllowedTools = []string{"view", "grep"} }, nil},
		{"bad mode", func(t *Task) { t.Mode = "auto" }, []string{"mode"}},
		{"bad tool name", func(t *Task) { t.AllowedTools = []string{"view", "rm -rf"} }, []string{"allowed_tools[1]"}},
		{"several", func(t *Task) { t.Repo.URL = ""; t.Instruction = "" }, []string{"repo.url", "instruction"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk := valid()
			c.mutate(&tk)
			err := tk.Validate()
			if len(c.fields) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate() = %v, want *ValidationError", err)
			}
			var got []string
			for _, f := range ve.Fields {
				got = append(got, f.Field)
			}
			if strings.Join(got, ",") != strings.Join(c.fields, ",") {
				t.Fatalf("fields at fault = %v, want %v (%v)", got, c.fields, err)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	data, err := os.ReadFile("testdata/full.json")
	if err != nil {
		t.Fatal(err)
	}
	tk, err := Decode(data)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if err := tk.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if time.Duration(tk.Limits.Timeout) != 30*time.Minute || tk.Output.PullRequest.Base != "main" || tk.Source.Issue != "org/repo#12" {
		t.Fatalf("decoded %+v", tk)
	}
	bad := []struct{ name, body, want string }{
		{"not json", `{"repo":`, "body"},
		{"unknown field", `{"repo":{"url":"/r"},"instruction":"x","instructions":"y"}`, "unknown field"},
		{"trailing", `{"repo":{"url":"/r"},"instruction":"x"} {}`, "trailing"},
		{"bad duration", `{"repo":{"url":"/r"},"instruction":"x","limits":{"timeout":"soon"}}`, "duration"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode([]byte(c.body))
			var ve *ValidationError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Decode(%s) = %v, want a ValidationError mentioning %q", c.body, err, c.want)
			}
		})
	}
}

func TestDurationJSON(t *testing.T) {
	for in, want := range map[string]time.Duration{`"90s"`: 90 * time.Second, `120`: 2 * time.Minute, `"1h30m"`: 90 * time.Minute} {
		var d Duration
		if err := json.Unmarshal([]byte(in), &d); err != nil || time.Duration(d) != want {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v", in, time.Duration(d), err, want)
		}
	}
	b, _ := json.Marshal(Duration(90 * time.Second))
	if string(b) != `"1m30s"` {
		t.Errorf("Marshal = %s", b)
	}
}

func TestStates(t *testing.T) {
	want := map[State]int{
		StateResolved: 0, StateUnresolved: 1, StateCancelled: 1, StateTimedOut: 1,
		StateRejected: 2, StateFailed: 3,
	}
	for s, code := range want {
		if !s.Final() || s.ExitCode() != code {
			t.Errorf("%s: Final=%v ExitCode=%d, want final and %d", s, s.Final(), s.ExitCode(), code)
		}
	}
	for _, s := range []State{StateQueued, StateRunning, StateVerifying} {
		if s.Final() || !s.Valid() {
			t.Errorf("%s: Final=%v Valid=%v", s, s.Final(), s.Valid())
		}
	}
	if State("done").Valid() {
		t.Error(`State("done") is valid`)
	}
}

func TestNewID(t *testing.T) {
	a, b := NewID(), NewID()
	if a == b || !idPattern.MatchString(a) {
		t.Fatalf("NewID gave %q and %q", a, b)
	}
}

func TestGradingValidateAndHidden(t *testing.T) {
	g := func() *Grading {
		return &Grading{TestPatch: "diff", FailToPass: []string{"TestA"}, Tests: TestSelection{Framework: FrameworkGo, Files: []string{"a_test.go"}}}
	}
	cases := []struct {
		name   string
		mutate func(*Grading)
		fields []string
	}{
		{"valid", func(*Grading) {}, nil},
		{"discover needs no lists", func(g *Grading) { g.FailToPass = nil; g.Discover = true }, nil},
		{"no fail-to-pass", func(g *Grading) { g.FailToPass = nil }, []string{"grading.fail_to_pass"}},
		{"framework", func(g *Grading) { g.Tests.Framework = "rspec" }, []string{"grading.tests.framework"}},
		{"files", func(g *Grading) { g.Tests.Files = nil }, []string{"grading.tests.files"}},
		{"huge patch", func(g *Grading) { g.TestPatch = strings.Repeat("x", MaxTestPatchBytes+1) }, []string{"grading.test_patch"}},
		{"too many tests", func(g *Grading) { g.PassToPass = make([]string, MaxGradingTests) }, []string{"grading"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk := valid()
			tk.Source.Kind = "bench"
			tk.Grading = g()
			c.mutate(tk.Grading)
			err := tk.Validate()
			var got []string
			var ve *ValidationError
			if errors.As(err, &ve) {
				for _, f := range ve.Fields {
					got = append(got, f.Field)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != strings.Join(c.fields, ",") {
				t.Fatalf("fields at fault = %v, want %v", got, c.fields)
			}
		})
	}
	tk := valid()
	tk.Grading = g()
	if h := tk.Hidden(); h.Grading != nil || tk.Grading == nil || h.Instruction != tk.Instruction {
		t.Errorf("Hidden() = %+v (original %+v)", h, tk)
	}
	b, _ := json.Marshal(tk.Hidden())
	if strings.Contains(string(b), "grading") {
		t.Errorf("hidden task JSON holds grading: %s", b)
	}
}
