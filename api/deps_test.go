package api

import (
	"os/exec"
	"strings"
	"testing"
)

// The API and its client are linked into every `wrench` client command and
// into anything that embeds the client: they must not bring a NATS server
// (or NATS at all) with them. They talk to the queue through interfaces
// declared here.
func TestAPIDoesNotLinkNATS(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/nats-io/") || dep == "github.com/wrenchworks/wrench/queue" {
			t.Errorf("api depends on %s", dep)
		}
	}
}
