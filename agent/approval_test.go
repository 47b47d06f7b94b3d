package agent_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/task"
)

// approver records requests and answers from a list (true when it runs
// out).
type approver struct {
	reqs    []agent.ApprovalRequest
	answers []bool
	err     error
}

func (a *approver) approve(ctx context.Context, req agent.ApprovalRequest) (bool, error) {
	a.reqs = append(a.reqs, req)
	if a.err != nil {
		return false, a.err
	}
	if len(a.answers) == 0 {
		return true, nil
	}
	ok := a.answers[0]
	a.answers = a.answers[1:]
	return ok, nil
}

func TestApprovalConfirmAsksBeforeCommandsAndWrites(t *testing.T) {
	env := memenv.New(map[string]string{"calc.go": calcGo, "old.txt": "x\n"})
	var ap approver
	r, _ := newRun(env,
		calls(view("calc.go"), call("bash", map[string]any{"command": "echo hi"})),
		calls(edit("calc.go", "a - b", "a + b")),
		calls(view("old.txt"), call("patch", map[string]any{"patch_text": "*** Begin Patch\n*** Add File: new.txt\n+n\n*** Delete File: old.txt\n*** End Patch\n"})),
		finish("done"),
	)
	r.Task.TestCommand = ""
	r.Approval = agent.ApproveConfirm
	r.Approve = ap.approve
	out, err := agent.New(agent.Config{}).Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if out.Reason != agent.StopFinished {
		t.Fatalf("reason %s", out.Reason)
	}
	// view and finish are not asked about; bash, edit and patch are.
	if len(ap.reqs) != 3 {
		t.Fatalf("%d approval requests: %+v", len(ap.reqs), ap.reqs)
	}
	if r := ap.reqs[0]; r.Call.Name != "bash" || r.Command != "echo hi" || r.Diff != "" {
		t.Errorf("bash request = %+v", r)
	}
	if r := ap.reqs[1]; r.Call.Name != "edit" || len(r.Paths) != 1 || r.Paths[0] != "calc.go" || !strings.Contains(r.Diff, "-\treturn a - b\n+\treturn a + b") {
		t.Errorf("edit request = %+v", r)
	}
	if r := ap.reqs[2]; r.Call.Name != "patch" || strings.Join(r.Paths, ",") != "new.txt,old.txt" || !strings.Contains(r.Diff, "+n") || !strings.Contains(r.Diff, "-x") {
		t.Errorf("patch request = %+v", r)
	}
	if _, ok := env.File("new.txt"); !ok {
		t.Errorf("approved patch not applied")
	}
}

func TestApprovalDenialEndsTheRun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		first   reply
		err     error
		unrun   string // a command that must not have run
		file    string // calc.go must keep this content
		results int
	}{
		{name: "denied command", first: calls(call("bash", map[string]any{"command": "rm -rf src"}), call("bash", map[string]any{"command": "echo after"})), unrun: "rm -rf src", results: 2},
		{name: "denied edit", first: calls(view("calc.go"), edit("calc.go", "a - b", "a + b")), file: calcGo, results: 2},
		{name: "approver failure", first: calls(call("bash", map[string]any{"command": "make"})), err: errors.New("terminal closed"), unrun: "make", results: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := memenv.New(map[string]string{"calc.go": calcGo})
			ap := approver{answers: []bool{false}, err: tc.err}
			r, m := newRun(env, tc.first, finish("never"))
			r.Approval = agent.ApproveConfirm
			r.Approve = ap.approve
			out, err := agent.New(agent.Config{}).Run(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			if out.Reason != agent.StopDenied || len(m.requests()) != 1 {
				t.Fatalf("reason %s after %d model calls", out.Reason, len(m.requests()))
			}
			if (tc.err != nil) != (out.Err != nil) || (tc.err != nil && !errors.Is(out.Err, tc.err)) {
				t.Errorf("err = %v", out.Err)
			}
			for _, c := range env.Commands() {
				if c == tc.unrun || c == "echo after" {
					t.Errorf("%q ran", c)
				}
			}
			if got, _ := env.File("calc.go"); tc.file != "" && got != tc.file {
				t.Errorf("calc.go changed: %q", got)
			}
			res := toolResults(out.Messages)
			if len(res) != tc.results {
				t.Fatalf("results %+v", res)
			}
			denied := res[len(res)-1].Content
			if tc.name == "denied command" {
				denied = res[0].Content
				if res[1].Content != "Not run: an earlier call in this reply was denied." {
					t.Errorf("second result = %q", res[1].Content)
				}
			}
			if !strings.HasPrefix(denied, "Permission denied: the user did not approve") {
				t.Errorf("denied result = %q", denied)
			}
		})
	}
}

func TestApprovalInTextMode(t *testing.T) {
	env := memenv.New(nil)
	ap := approver{answers: []bool{true, false}}
	r, _ := newRun(env, text("```bash\necho one\n```"), text("```bash\necho two\n```"), text("```bash\necho three\n```"))
	r.Protocol = task.ProtocolText
	r.Task.TestCommand = ""
	r.Approval = agent.ApproveConfirm
	r.Approve = ap.approve
	out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
	if out.Reason != agent.StopDenied || strings.Join(env.Commands(), "|") != "echo one" || len(ap.reqs) != 2 || ap.reqs[1].Command != "echo two" {
		t.Errorf("reason %s, commands %q, requests %+v", out.Reason, env.Commands(), ap.reqs)
	}
	if got := lastUser(out.Messages); !strings.HasPrefix(got, "Permission denied") {
		t.Errorf("last observation = %q", got)
	}
}

func TestApprovalYoloNeverAsks(t *testing.T) {
	var ap approver
	r, _ := newRun(memenv.New(nil), calls(call("bash", map[string]any{"command": "echo hi"})), finish("ok"))
	r.Task.TestCommand = ""
	r.Approve = ap.approve // set, but the mode is the default (yolo)
	out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
	if out.Reason != agent.StopFinished || len(ap.reqs) != 0 {
		t.Errorf("reason %s, %d requests", out.Reason, len(ap.reqs))
	}
}

func TestApprovalSettingsAreValidated(t *testing.T) {
	var ap approver
	for _, tc := range []struct {
		mode agent.ApprovalMode
		fn   agent.Approver
	}{{agent.ApproveConfirm, nil}, {"human", ap.approve}} {
		r, _ := newRun(memenv.New(nil))
		r.Approval, r.Approve = tc.mode, tc.fn
		if _, err := agent.New(agent.Config{}).Run(context.Background(), r); !errors.Is(err, agent.ErrInvalidRun) {
			t.Errorf("mode %q: err = %v", tc.mode, err)
		}
	}
}

func TestPromptApprover(t *testing.T) {
	for _, tc := range []struct {
		in   string
		req  agent.ApprovalRequest
		ok   bool
		show string
	}{
		{"y\n", agent.ApprovalRequest{Command: "make test"}, true, "wants to run:\n  make test"},
		{"YES\n", agent.ApprovalRequest{Paths: []string{"a.go"}, Diff: "--- a/a.go\n+++ b/a.go\n"}, true, "wants to change a.go:\n--- a/a.go"},
		{"n\n", agent.ApprovalRequest{Command: "rm x"}, false, "Allow? [y/N]"},
		{"", agent.ApprovalRequest{Command: "rm x"}, false, "Allow?"},
	} {
		var out bytes.Buffer
		ok, err := agent.PromptApprover(strings.NewReader(tc.in), &out)(context.Background(), tc.req)
		if err != nil || ok != tc.ok || !strings.Contains(out.String(), tc.show) {
			t.Errorf("in %q: %v %v, shown %q", tc.in, ok, err, out.String())
		}
	}
}
