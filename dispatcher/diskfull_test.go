package dispatcher_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/internal/disktest"
	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/queue/natsserver"
	"github.com/wrenchworks/wrench/task"
)

// TestDiskFullHandsResultsBackUntilTheStoreRecovers runs tasks whose
// results come back while the store's disk (a real tmpfs under the
// embedded JetStream) is full: no task becomes final without its patch;
// each delivery is handed back and the worker goes unready. Once the space
// is back the server restarts JetStream by itself, the worker is ready
// again, and every task runs again and resolves with its patch stored.
func TestDiskFullHandsResultsBackUntilTheStoreRecovers(t *testing.T) {
	dir := disktest.Mount(t, "96m")
	e := natstest.Start(t, natsserver.Config{DataDir: dir, MinFreeDisk: 4 << 20, GuardInterval: 100 * time.Millisecond})
	c := natstest.Connect(t, e, func(cfg *queue.Config) {
		cfg.Logger = testLogger(t)
		cfg.Retention = queue.Retention{StateMaxBytes: 8 << 20, ArtifactsMaxBytes: 32 << 20}
	})
	patchOf := func(id string) []byte { return bytes.Repeat([]byte(id+"\n"), (256<<10)/(len(id)+1)) }
	filled := make(chan struct{})
	r := newFakeRunner()
	r.behave = func(ctx context.Context, tk task.Task, _ int, _ func(task.Event)) task.Report {
		<-filled
		p := patchOf(tk.ID)
		return task.Report{Result: task.Result{Status: task.StateResolved, Reason: "finished", Patch: string(p)},
			Artifacts: map[string][]byte{"patch.diff": p}}
	}
	d := newDispatcher(t, c, r, dispatcher.Config{Slots: 3, ProbeInterval: 100 * time.Millisecond})
	runDispatcher(t, d)
	waitFor(t, "the dispatcher ready", func() bool { return d.Ready() == nil })

	ids := []string{"t-full-1", "t-full-2", "t-full-3"}
	for _, id := range ids {
		submit(t, c, newTask(id))
	}
	waitFor(t, "every task running", func() bool { return r.total() == len(ids) })
	free := disktest.Fill(t, dir)
	close(filled)

	waitFor(t, "the worker unready on the store", func() bool { return d.Ready() != nil })
	if err := e.Health(); err == nil {
		t.Error("the embedded server says healthy on a full disk")
	}
	// A while on the full disk: nothing becomes final.
	time.Sleep(time.Second)
	for _, id := range ids {
		if st, err := c.States().Status(context.Background(), id); err == nil && st.State.Final() {
			t.Errorf("%s is %s on a full disk (%s)", id, st.State, st.Reason)
		}
	}

	free()
	for _, id := range ids {
		st := waitFinal(t, c, id)
		if st.State != task.StateResolved || len(r.runs(id)) < 2 {
			t.Errorf("%s: %s (%s) after runs %v; want resolved after a hand-back", id, st.State, st.Reason, r.runs(id))
			continue
		}
		got, err := c.Artifacts().Get(context.Background(), id, "patch.diff")
		if err != nil || !bytes.Equal(got, patchOf(id)) {
			t.Errorf("%s: patch artifact %d bytes, %v; want its %d bytes", id, len(got), err, len(patchOf(id)))
		}
	}
	if err := d.Ready(); err != nil {
		t.Errorf("the worker is still unready after the store recovered: %v", err)
	}
	t.Logf("runs per task: %v", fmt.Sprint(r.runs(ids[0]), r.runs(ids[1]), r.runs(ids[2])))
}
