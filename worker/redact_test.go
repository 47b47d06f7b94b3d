package worker

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/task"
)

// Nothing that leaves the worker carries a secret: summary, reason,
// patch, events and artifacts. The summary and the patch used to go out
// as the model wrote them (into the CLI's JSON, the API, the event stream,
// the stored state and a pull request body).
func TestHostileModel_ResultsAreRedacted(t *testing.T) {
	const secret = "s3cr3t-worker-value"
	const shaped = "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB" // a token nobody listed
	leaked := "the key is " + secret + " and " + shaped
	prov := &fakeEnvironments{diff: "diff --git a/k b/k\n--- a/k\n+++ b/k\n@@ -1 +1 @@\n-x\n+" + leaked + "\n"}
	ag := &fakeAgent{reason: agent.StopModelError, summary: leaked,
		err: &agent.ModelError{Kind: agent.ModelServer, Err: errors.New("upstream said: " + leaked)}}
	w, err := New(Config{Sources: &fakeSources{}, Environments: prov, Models: fakeModels(nil), Agent: ag,
		Secrets: []string{secret}, Policy: policy.Default(policy.Options{Loopback: true})})
	if err != nil {
		t.Fatal(err)
	}
	var events []task.Event
	rep := w.Run(context.Background(), testTask(), 1, func(ev task.Event) { events = append(events, ev) })
	check := func(what string, v any) {
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), secret) || strings.Contains(string(b), shaped) {
			t.Errorf("%s leaks: %s", what, b)
		}
	}
	check("the result", rep.Result)
	check("the events", events)
	for name, b := range rep.Artifacts {
		check(name, string(b))
	}
	if !strings.Contains(rep.Result.Summary, task.Redacted) || !strings.Contains(rep.Result.Patch, task.Redacted) {
		t.Errorf("summary %q / patch %q lost more than the secrets", rep.Result.Summary, rep.Result.Patch)
	}
}
