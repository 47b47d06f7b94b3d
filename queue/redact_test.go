package queue_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// A URL's credentials reach the worker through the work queue, and no
// state record, answer or listing: the API used to return them verbatim.
func TestHostileClient_URLCredentialsAreNotStored(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	tk := newTask("t-creds")
	tk.Repo.URL = "https://user:hunter2-pw@git.example.com/r.git?access_token=qtok-secret"
	st := submit(t, c, tk)
	leaks := func(what string, v any) {
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), "hunter2-pw") || strings.Contains(string(b), "qtok-secret") {
			t.Errorf("%s carries the URL's credentials: %s", what, b)
		}
	}
	leaks("Submit's status", st)
	got, err := c.States().Status(ctx, "t-creds")
	if err != nil {
		t.Fatal(err)
	}
	leaks("the state record", got)
	if got.Task == nil || got.Task.Repo.URL != "https://git.example.com/r.git?access_token=REDACTED" {
		t.Errorf("stored URL = %+v", got.Task)
	}
	list, _, err := c.States().List(ctx, task.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leaks("the listing", list)

	w := c.Work()
	if err := w.Open(ctx, queue.ConsumerConfig{AckWait: time.Minute, MaxDeliver: 3}); err != nil {
		t.Fatal(err)
	}
	d := nextDelivery(t, w)
	var queued task.Task
	if err := json.Unmarshal(d.Data, &queued); err != nil || queued.Repo.URL != tk.Repo.URL {
		t.Fatalf("the worker gets %q (%v), want the URL as submitted", queued.Repo.URL, err)
	}
	if _, st, err := c.States().Acquire(ctx, queued, queue.Claim{Attempt: d.Attempt, Worker: "w-1"}); err != nil {
		t.Fatal(err)
	} else {
		leaks("the running record", st)
	}
}
