package api

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/task"
)

func TestArtifactDownload(t *testing.T) {
	f := newFake()
	f.put(task.Status{TaskID: "t-run", State: task.StateRunning})
	f.put(task.Status{TaskID: "t-done", State: task.StateResolved, Result: &task.Result{Status: task.StateResolved,
		Artifacts: []string{"log.txt", "patch.diff", "trajectory.jsonl"}}})
	f.artifacts["t-done/trajectory.jsonl"] = []byte(`{"seq":1,"kind":"run_start"}` + "\n")
	f.artifacts["t-done/log.txt"] = []byte("12:00:00.000 phase clone\n")
	f.artifacts["t-other/trajectory.jsonl"] = []byte("another task's\n")
	srv := newTestServer(t, f, nil)

	for _, tc := range []struct {
		name, path string
		code       int
		has, ctype string
	}{
		{"trajectory", "/v1/tasks/t-done/artifacts/trajectory.jsonl", 200, `"run_start"`, "application/jsonl; charset=utf-8"},
		{"log", "/v1/tasks/t-done/artifacts/log.txt", 200, "phase clone", "text/plain; charset=utf-8"},
		{"missing, naming what there is", "/v1/tasks/t-done/artifacts/core.dump", 404, "it has: log.txt, patch.diff, trajectory.jsonl", ""},
		{"unknown task", "/v1/tasks/t-nope/artifacts/log.txt", 404, "t-nope", ""},
		{"not final", "/v1/tasks/t-run/artifacts/log.txt", 409, "running", ""},
		{"dot dot", "/v1/tasks/t-done/artifacts/%2E%2E", 400, "not an artifact name", ""},
		{"escaped slash to another task", "/v1/tasks/t-done/artifacts/..%2Ft-other%2Ftrajectory.jsonl", 400, "not an artifact name", ""},
		{"hidden name", "/v1/tasks/t-done/artifacts/.env", 400, "not an artifact name", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := call(t, srv, "GET", tc.path, "", nil)
			if a.code != tc.code || !contains(a.body, tc.has) {
				t.Fatalf("%d %q, want %d with %q", a.code, a.body, tc.code, tc.has)
			}
			if tc.ctype != "" && (a.header.Get("Content-Type") != tc.ctype || a.header.Get("Content-Disposition") == "") {
				t.Errorf("headers %v", a.header)
			}
		})
	}

	c := NewClient(srv.URL, "")
	b, err := c.Artifact(context.Background(), "t-done", TrajectoryArtifact)
	if err != nil || string(b) != string(f.artifacts["t-done/trajectory.jsonl"]) {
		t.Errorf("client: %q, %v", b, err)
	}
	if _, err := c.Artifact(context.Background(), "t-done", "core.dump"); !errors.Is(err, ErrNotFound) {
		t.Errorf("client, missing artifact: %v", err)
	}
	if _, err := c.Artifact(context.Background(), "t-done", "../t-other/x"); err == nil {
		t.Error("client sent an unsafe name")
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
