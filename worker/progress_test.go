package worker

import (
	"context"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/task"
)

// TestCloneProgressBecomesEvents: a clone's progress reaches the task's
// events (phase clone), at most one a second plus each finished stage.
func TestCloneProgressBecomesEvents(t *testing.T) {
	src := &fakeSources{progress: "remote: Enumerating objects: 10, done.\n" +
		"Counting objects:  10% (1/10)\rCounting objects:  50% (5/10)\rCounting objects: 100% (10/10), done.\n" +
		"Receiving objects:  45% (45/100)\rReceiving objects:  90% (90/100)\r"}
	w, err := New(Config{Sources: src, Environments: &fakeEnvironments{}, Models: fakeModels(nil), Agent: &fakeAgent{reason: agent.StopFinished}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	w.Run(context.Background(), testTask(), 1, func(ev task.Event) {
		if ev.Kind == task.EventLog && ev.Phase == "clone" {
			got = append(got, ev.Text)
		}
	})
	want := []string{"Enumerating objects: 10, done.", "Counting objects: 100% (10/10), done."}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("clone progress events %q, want %q", got, want)
	}
}
