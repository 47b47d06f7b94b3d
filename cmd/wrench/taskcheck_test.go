package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/api"
)

// TestBadTasksAreRejectedAtSubmission: a task no run could accept (an
// unknown tool, the text protocol without bash) is answered 400 naming the
// field by the API, and refused by wrench submit before it sends anything;
// nothing is queued, so nothing is retried or dead-lettered later.
func TestBadTasksAreRejectedAtSubmission(t *testing.T) {
	srv := startServe(t, t.TempDir(), "", fakeRunner(nil))
	for body, field := range map[string]string{
		`{"repo":{"url":"https://example.com/r.git"},"instruction":"resolve","allowed_tools":["view","bsh"]}`:             "allowed_tools[1]",
		`{"repo":{"url":"https://example.com/r.git"},"instruction":"resolve","protocol":"text","allowed_tools":["view"]}`: "protocol",
		`{"repo":{"url":"https://example.com/r.git"},"instruction":"resolve","mode":"plan","plan_first":true}`:            "plan_first",
	} {
		resp, err := http.Post(srv.url+"/v1/tasks", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var e api.Error
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || len(e.Fields) != 1 || e.Fields[0].Field != field {
			t.Errorf("%s: %d %+v, want 400 naming %s", body, resp.StatusCode, e, field)
		}
	}

	file := filepath.Join(t.TempDir(), "task.json")
	os.WriteFile(file, []byte(`{"repo":{"url":"https://example.com/r.git"},"instruction":"resolve","allowed_tools":["grpe"]}`), 0o644)
	code, _, errOut := wrench(t, srv, "submit", "--file", file)
	if code != exitBadInput || !strings.Contains(errOut, `allowed_tools[0]: "grpe" is not a tool`) {
		t.Errorf("submit: exit %d, %s", code, errOut)
	}

	code, out, errOut := wrench(t, srv, "list", "--json")
	var lr api.ListResponse
	if err := json.NewDecoder(bytes.NewReader([]byte(out))).Decode(&lr); code != 0 || err != nil || len(lr.Tasks) != 0 {
		t.Errorf("list: exit %d, %v, %d tasks queued (%s)", code, err, len(lr.Tasks), errOut)
	}
}
