package main

import (
	"context"
	"errors"
	"testing"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/task"
)

// serve holds API tasks to its policy, whose built-in form lets tasks name
// this disk (a local repository, a scripted model's file) only while the
// API listens on loopback; beyond loopback such a task is a 400 naming
// the field and nothing is queued.
func TestHostileClient_ServePolicyFollowsTheListener(t *testing.T) {
	local := task.Task{Repo: task.Repo{URL: t.TempDir()}, Instruction: "x"}
	scripted := task.Task{Repo: task.Repo{URL: "https://example.com/r.git"}, Instruction: "x", Model: "scripted:/etc/shadow"}
	for _, tc := range []struct {
		addr   string
		refuse bool
	}{{"127.0.0.1:0", false}, {"0.0.0.0:0", true}} {
		srv := startServeOn(t, tc.addr, t.TempDir(), "tok", fakeRunner(nil), nil)
		c := api.NewClient(srv.url, "tok")
		for _, tk := range []task.Task{local, scripted} {
			_, _, err := c.Submit(context.Background(), tk)
			if refused := errors.Is(err, api.ErrInvalid); refused != tc.refuse {
				t.Errorf("API on %s: submit %s / %s: %v", tc.addr, tk.Repo.URL, tk.Model, err)
			}
		}
	}
}
