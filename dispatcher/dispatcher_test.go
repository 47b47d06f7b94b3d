package dispatcher_test

import (
	"context"
	"testing"

	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/task"
)

func TestResolvesTaskAndStoresResult(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	r := newFakeRunner()
	d := newDispatcher(t, c, r, dispatcher.Config{Slots: 2, WorkerID: "w1"})
	runDispatcher(t, d)

	submit(t, c, newTask("t-ok"))
	st := waitFinal(t, c, "t-ok")
	if st.State != task.StateResolved || st.Result == nil || st.Result.Worker != "w1" || st.Result.Attempt != 1 {
		t.Fatalf("status = %+v", st)
	}
	b, err := c.Artifact(context.Background(), "t-ok", "patch.diff")
	if err != nil || string(b) != "--- a\n+++ b\n" {
		t.Fatalf("artifact = %q, %v", b, err)
	}
	if got := r.runs("t-ok"); len(got) != 1 {
		t.Fatalf("runs = %v, want one", got)
	}
}
