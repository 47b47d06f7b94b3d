package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/task"
)

// serve with a policy that names tenants: a tenant's token is accepted and
// what it submits is that tenant's; the admin token's tasks get the
// tenant of their repository, else the default one; a client naming
// another tenant is refused. The tenant is in the status, the result and
// the per-tenant metrics, and serve's own dispatcher runs under the
// policy's running limits.
func TestServeAssignsTenants(t *testing.T) {
	dir := t.TempDir()
	sum := sha256.Sum256([]byte("pay-token"))
	pol := filepath.Join(dir, "policy.yaml")
	body := "defaults: {local_paths: true}\ntenants:\n" +
		"  - {name: payments, tokens: [{sha256: " + hex.EncodeToString(sum[:]) + "}], max_running: 1}\n" +
		"  - {name: web, repositories: [\"https://example.com/web*\"]}\n"
	if err := os.WriteFile(pol, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServeWith(t, filepath.Join(dir, "data"), "admin-token", fakeRunner(nil), func(f *serveFlags) {
		f.service.common.policy = pol
	})
	ctx := context.Background()
	pay, admin := api.NewClient(srv.url, "pay-token"), api.NewClient(srv.url, "admin-token")
	for _, tc := range []struct {
		c      *api.Client
		url    string
		tenant string
	}{
		{pay, "https://example.com/web.git", "payments"},
		{pay, "https://example.com/other.git", "payments"},
		{admin, "https://example.com/web.git", "web"},
		{admin, "https://example.com/other.git", task.DefaultTenant},
	} {
		st, _, err := tc.c.Submit(ctx, task.Task{Repo: task.Repo{URL: tc.url}, Instruction: "resolve"})
		if err != nil {
			t.Fatal(err)
		}
		if st.Task == nil || st.Task.Tenant != tc.tenant {
			t.Fatalf("%s: queued as %+v, want tenant %s", tc.url, st.Task, tc.tenant)
		}
		final := waitFinalAPI(t, tc.c, st.TaskID)
		if final.State != task.StateResolved || final.Result.Tenant != tc.tenant {
			t.Fatalf("%s: final %s, result tenant %q, want %s", tc.url, final.State, final.Result.Tenant, tc.tenant)
		}
	}
	_, _, err := admin.Submit(ctx, task.Task{Repo: task.Repo{URL: "https://example.com/x.git"}, Instruction: "resolve", Tenant: "payments"})
	if !errors.Is(err, api.ErrInvalid) {
		t.Fatalf("a client naming another tenant: %v", err)
	}
	resp, err := http.Get(srv.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`wrench_tenant_tasks_finished_total{status="resolved",tenant="payments"} 2`,
		`wrench_tenant_tasks_finished_total{status="resolved",tenant="web"} 1`,
		`wrench_tenant_tasks_finished_total{status="resolved",tenant="default"} 1`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// waitFinalAPI polls a task's status through the API until it is final.
func waitFinalAPI(t *testing.T, c *api.Client, id string) task.Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := c.Status(context.Background(), id)
		if err == nil && st.State.Final() {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s not final: %+v %v", id, st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
