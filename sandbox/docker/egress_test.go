package docker_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/egress"
	"github.com/wrenchworks/wrench/sandbox"
)

// TestEgressDir checks the wiring of Spec.EgressDir: the directory is
// mounted read-only at sandbox.EgressRunDir, commands see the proxy
// variables, and the shim passes connections to sandbox.EgressListen to
// the egress proxy serving the socket there (package egress tests the
// proxy itself).
func TestEgressDir(t *testing.T) {
	f := newFixture(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.2:0") // host loopback, not exempt by NO_PROXY
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "proxied %s %s\n", r.Method, r.URL)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	dir := filepath.Join(t.TempDir(), "run")
	s, err := egress.Open(context.Background(), egress.SessionConfig{Dir: dir, TaskID: "t", Phase: egress.PhaseSetup, Allow: []string{"127.0.0.2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	host := ln.Addr().String()

	sb := f.start(t, sandbox.Spec{EgressDir: dir})
	checks := []struct{ name, cmd, want string }{
		{"proxy env", "echo $HTTP_PROXY $https_proxy $NO_PROXY", "http://" + sandbox.EgressListen + " http://" + sandbox.EgressListen + " localhost,127.0.0.1\n"},
		{"through the proxy", "wget -q -O - http://" + host + "/x", "proxied GET /x\n"},
		{"mount read-only", "touch " + sandbox.EgressRunDir + "/f 2>/dev/null || echo refused", "refused\n"},
		{"still no interface", "ls /sys/class/net", "lo\n"},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if res := run(t, sb, c.cmd); string(res.Output) != c.want {
				t.Errorf("%s: got %q, want %q", c.cmd, res.Output, c.want)
			}
		})
	}
	t.Run("not in the container's configuration", func(t *testing.T) {
		ci, err := f.cli.ContainerInspect(context.Background(), sb.ID())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range ci.Config.Env {
			if strings.Contains(strings.ToLower(kv), "proxy") {
				t.Errorf("container env has %s: a snapshot would carry it", kv)
			}
		}
	})
	t.Run("off without the spec field", func(t *testing.T) {
		plain := f.start(t, sandbox.Spec{})
		res := run(t, plain, "echo \"[$HTTP_PROXY]\"; ls "+sandbox.EgressRunDir+" 2>/dev/null || echo absent")
		if got := string(res.Output); !strings.Contains(got, "[]") || !strings.Contains(got, "absent") {
			t.Errorf("sandbox without EgressDir: %q", got)
		}
	})
	t.Run("relative dir refused", func(t *testing.T) {
		if _, err := f.p.Start(t.Context(), sandbox.Spec{EgressDir: "run"}); sandbox.KindOf(err) != sandbox.ErrInvalid {
			t.Errorf("Start with a relative EgressDir: %v", err)
		}
	})
}
