package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The dispatcher gets the policy's running limits when it sets any, and
// none (no limits bucket, no leases) when it sets none; and the tenants
// the policy names, whose consumers it makes at start.
func TestClusterCapsFromPolicy(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var f serviceFlags
	f.common.policy = write("limits.yaml", "tenants: [{name: acme, max_running: 3}]\nrepositories: [{match: \"https://x/*\", max_running: 1}]\n")
	caps, tenants, err := policyQueue(f)
	if err != nil || caps == nil || len(tenants) != 1 || tenants[0] != "acme" {
		t.Fatalf("caps %v, tenants %v, %v", caps, tenants, err)
	}
	if caps.TenantLimit("acme") != 3 || caps.RepoLimit("https://x/y") != 1 || caps.TenantLimit("default") != 0 {
		t.Errorf("limits not the policy's")
	}
	f.common.policy = write("none.yaml", "tenants: [{name: acme}]\n")
	if caps, tenants, err := policyQueue(f); err != nil || caps != nil || len(tenants) != 1 {
		t.Errorf("a policy without running limits: caps %v, tenants %v, %v", caps, tenants, err)
	}
	f.common.policy = write("bad.yaml", "tenants: [{name: Bad}]\n")
	if _, _, err := policyQueue(f); err == nil {
		t.Error("a bad policy was accepted")
	}
}
