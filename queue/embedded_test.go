package queue_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// Starting the embedded server twice on one data dir keeps every task,
// result, artifact and queued message.
func TestEmbeddedRestartKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	e, err := queue.StartEmbedded(ctx, queue.EmbeddedConfig{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if e.ClientURL() == "" {
		t.Fatal("no client URL with a listener")
	}
	c, err := queue.Connect(ctx, queue.Config{URL: e.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	submit(t, c, newTask("t-queued"))
	done := newTask("t-done")
	submit(t, c, done)
	l, _, err := c.Acquire(ctx, done, 1, "w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutArtifacts(ctx, done.ID, map[string][]byte{"patch.diff": []byte("p")}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Finish(ctx, task.Result{Status: task.StateResolved, Patch: "p"}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	e.Shutdown()

	e2 := startNATS(t, dir)
	if e2.ClientURL() != "" {
		t.Fatalf("in-process server has URL %q", e2.ClientURL())
	}
	c2 := connect(t, e2)
	if st, err := c2.Status(ctx, "t-queued"); err != nil || st.State != task.StateQueued {
		t.Fatalf("queued task after restart = %+v, %v", st, err)
	}
	if st, err := c2.Status(ctx, "t-done"); err != nil || st.State != task.StateResolved || st.Result.Patch != "p" {
		t.Fatalf("done task after restart = %+v, %v", st, err)
	}
	if b, err := c2.Artifact(ctx, "t-done", "patch.diff"); err != nil || string(b) != "p" {
		t.Fatalf("artifact after restart = %q, %v", b, err)
	}
	// t-done's message was never acked here, so both messages remain.
	if n := streamMsgs(t, c2, queue.TasksStream); n != 2 {
		t.Fatalf("task stream holds %d messages, want 2", n)
	}
	if _, dup, err := c2.Submit(ctx, newTask("t-done")); err != nil || !dup {
		t.Fatalf("resubmit after restart: dup=%v err=%v", dup, err)
	}
}

func TestStartEmbeddedRejectsBadConfig(t *testing.T) {
	for _, cfg := range []queue.EmbeddedConfig{
		{},
		{DataDir: t.TempDir(), Listen: "nonsense"},
		{DataDir: t.TempDir(), Listen: "127.0.0.1:http"},
	} {
		if e, err := queue.StartEmbedded(context.Background(), cfg); err == nil {
			e.Shutdown()
			t.Errorf("StartEmbedded(%+v) succeeded", cfg)
		}
	}
}

func TestEmbeddedMonitorEndpoint(t *testing.T) {
	e, err := queue.StartEmbedded(context.Background(), queue.EmbeddedConfig{DataDir: t.TempDir(), MonitorListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	resp, err := http.Get("http://" + e.MonitorAddr() + "/jsz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/jsz: %s", resp.Status)
	}
	if startNATS(t, "").MonitorAddr() != "" {
		t.Fatal("monitor endpoint without MonitorListen")
	}
}
