package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// conformanceDir finds ../shared/conformance/<sub> relative to the module
// root; absent data skips the test, except under CI=true.
func conformanceDir(t *testing.T, sub string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("module root not found")
		}
		dir = parent
	}
	p := filepath.Join(dir, "..", "shared", "conformance", sub)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("conformance data %s is missing (required under CI=true): %v", p, err)
		}
		t.Skipf("conformance data %s is absent; skipping", p)
	}
	return p
}

type textConformance struct {
	Turns []struct {
		Assistant      string  `json:"assistant"`
		ExpectedAction *string `json:"expected_action"`
		ActionsFound   int     `json:"actions_found"`
		Observation    *string `json:"observation"`
	} `json:"turns"`
	FinalOutput string `json:"final_output"`
}

func loadTextConformance(t *testing.T) map[string]textConformance {
	dir := conformanceDir(t, "text-mode")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no text-mode files in %s: %v", dir, err)
	}
	out := map[string]textConformance{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c textConformance
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = c
	}
	return out
}

// TestTextModeConformanceParse: every recorded reply yields exactly the
// expected command, or a format error with the recorded count.
func TestTextModeConformanceParse(t *testing.T) {
	all := loadTextConformance(t)
	turns := 0
	for _, c := range all {
		turns += len(c.Turns)
	}
	t.Logf("text-mode conformance: %d files, %d turns", len(all), turns)
	for name, c := range all {
		t.Run(name, func(t *testing.T) {
			for i, turn := range c.Turns {
				got := agent.ParseTextActions(turn.Assistant)
				if turn.ExpectedAction == nil {
					if len(got) == 1 || len(got) != turn.ActionsFound {
						t.Errorf("turn %d: %d actions %q, want a format error (found %d)", i, len(got), got, turn.ActionsFound)
					}
					continue
				}
				if len(got) != 1 || got[0] != *turn.ExpectedAction {
					t.Errorf("turn %d: %q, want %q", i, got, *turn.ExpectedAction)
				}
			}
		})
	}
}

var recordedObservation = regexp.MustCompile(`(?s)^<returncode>(-?\d+)</returncode>\n<output>\n(.*)</output>$`)

// TestTextModeConformanceRun replays each recording through the loop: the
// model says what the recording says, the sandbox answers what it
// answered, and the run must execute exactly the expected commands,
// render the same observations, and finish exactly at the completion
// marker (or never, for recordings without one).
func TestTextModeConformanceRun(t *testing.T) {
	for name, c := range loadTextConformance(t) {
		t.Run(name, func(t *testing.T) {
			var replies []reply
			var want []string
			answers := map[string][]sandbox.ExecResult{}
			structured := true
			for _, turn := range c.Turns {
				replies = append(replies, text(turn.Assistant))
				if turn.ExpectedAction == nil {
					continue
				}
				cmd := *turn.ExpectedAction
				want = append(want, cmd)
				res := sandbox.ExecResult{}
				switch {
				case turn.Observation == nil: // the submission
					res.Output = []byte(agent.CompletionMarker + "\n" + c.FinalOutput)
					if !strings.Contains(cmd, agent.CompletionMarker) {
						res.Output = []byte("NANO_SWE_AGENT_FINAL_OUTPUT\n" + c.FinalOutput)
					}
				default:
					m := recordedObservation.FindStringSubmatch(*turn.Observation)
					if m == nil {
						structured = false
						res.Output = []byte(*turn.Observation)
						break
					}
					res.ExitCode, _ = strconv.Atoi(m[1])
					res.Output = []byte(m[2])
				}
				answers[cmd] = append(answers[cmd], res)
			}
			env := memenv.New(nil)
			env.Fallback(func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
				q := answers[req.Command]
				if len(q) == 0 {
					t.Errorf("unexpected command %q", req.Command)
					return sandbox.ExecResult{ExitCode: 127}, nil
				}
				answers[req.Command] = q[1:]
				return q[0], nil
			})
			r, m := newRun(env, replies...)
			r.Protocol = task.ProtocolText
			r.Task.TestCommand = ""
			r.Limits = agent.Limits{MaxFormatErrors: 100, HardTurnCap: 100}
			out, err := agent.New(agent.Config{}).Run(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			if got := env.Commands(); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
				t.Errorf("commands run:\n%q\nwant:\n%q", got, want)
			}
			last := c.Turns[len(c.Turns)-1]
			submits := last.ExpectedAction != nil && strings.Contains(*last.ExpectedAction, agent.CompletionMarker)
			switch {
			case submits:
				if out.Reason != agent.StopFinished || out.Summary != c.FinalOutput || len(m.requests()) != len(c.Turns) {
					t.Errorf("reason %s after %d of %d turns, summary %q", out.Reason, len(m.requests()), len(c.Turns), out.Summary)
				}
			default:
				if out.Reason == agent.StopFinished {
					t.Errorf("finished without the completion marker")
				}
			}
			// Observations: the recorded text is what the model is sent back
			// (followed, for failures, by the error class line), and format
			// errors say how many actions were found.
			reqs := m.requests()
			for i, turn := range c.Turns {
				if i+1 >= len(reqs) {
					break
				}
				got := lastUser(reqs[i+1].Messages)
				switch {
				case turn.ExpectedAction == nil:
					if !strings.Contains(got, "found "+strconv.Itoa(turn.ActionsFound)+" actions") {
						t.Errorf("turn %d: feedback %q", i, got)
					}
				case structured && turn.Observation != nil:
					if !strings.HasPrefix(got, *turn.Observation) {
						t.Errorf("turn %d: observation\n%q\nwant prefix\n%q", i, got, *turn.Observation)
					}
				}
			}
		})
	}
}
