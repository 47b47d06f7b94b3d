package worker

import (
	"context"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/task"
)

// A task that reached the queue without the API's check (a NATS client
// holding a worker's credentials) is held to the policy too, before
// anything is cloned or any model opened.
func TestHostileClient_PolicyAtTheWorker(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*task.Task)
		field  string
	}{
		{"scripted model", func(t *task.Task) { t.Repo.URL = "https://example.com/r.git"; t.Model = "scripted:/etc/shadow" }, "model"},
		{"local path", func(t *task.Task) { t.Repo.URL = "/etc" }, "repo.url"},
		{"pids", func(t *task.Task) { t.Repo.URL = "https://example.com/r.git"; t.Sandbox.Pids = 4_000_000 }, "sandbox.pids"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srcs := &fakeSources{}
			opened := false
			models := func(context.Context, string) (agent.Model, string, func() error, error) {
				opened = true
				return nil, "", nil, nil
			}
			w, err := New(Config{Sources: srcs, Environments: &fakeEnvironments{}, Models: models, Agent: &fakeAgent{reason: agent.StopFinished},
				Policy: policy.Default(policy.Options{Loopback: false})})
			if err != nil {
				t.Fatal(err)
			}
			tk := testTask()
			tc.mutate(&tk)
			rep := w.Run(context.Background(), tk, 1, nil)
			if rep.Result.Status != task.StateRejected || rep.Retry || !strings.Contains(rep.Result.Reason, tc.field) {
				t.Errorf("status %s retry %v reason %q; want rejected naming %s", rep.Result.Status, rep.Retry, rep.Result.Reason, tc.field)
			}
			srcs.mu.Lock()
			cloned := len(srcs.opened)
			srcs.mu.Unlock()
			if cloned > 0 || opened {
				t.Errorf("cloned %d, model opened %v before the refusal", cloned, opened)
			}
		})
	}
}
