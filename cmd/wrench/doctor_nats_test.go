package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue/natsserver"
)

// `wrench doctor --nats` fails on a queue of one replica on a server that
// syncs lazily, passes on one that syncs every write, and warns when it
// cannot tell.
func TestDoctorNATSDurability(t *testing.T) {
	for _, c := range []struct {
		name    string
		lazy    bool
		monitor bool
		ok      bool
		want    string
	}{
		{"lazy", true, true, false, "durability   FAIL"},
		{"always", false, true, true, "durability fsync"},
		{"unknown", false, false, true, "durability   WARN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := natstest.Start(t, natsserver.Config{Listen: "127.0.0.1:0", MonitorListen: "127.0.0.1:0", LazySync: c.lazy})
			n := natsFlags{url: s.ClientURL()}
			if c.monitor {
				n.monitors = "http://" + s.MonitorAddr()
			}
			var out bytes.Buffer
			if ok := doctorNATS(context.Background(), &out, n); ok != c.ok || !strings.Contains(out.String(), c.want) {
				t.Fatalf("ok = %v, output:\n%s\nwant ok %v and %q", ok, out.String(), c.ok, c.want)
			}
		})
	}
}

// serve on an external NATS that syncs lazily, with one replica, warns at
// start and exports the durability as "memory"; on the embedded server it
// is "fsync".
func TestServeReportsAdmissionDurability(t *testing.T) {
	lazy := natstest.Start(t, natsserver.Config{Listen: "127.0.0.1:0", MonitorListen: "127.0.0.1:0", LazySync: true})
	ts := startServeWith(t, t.TempDir(), "", nil, func(f *serveFlags) {
		f.nats.url, f.nats.monitors = lazy.ClientURL(), lazy.MonitorAddr()
		f.nats.layout.replicas = 1
	})
	if !strings.Contains(ts.stderr.String(), "WARNING: NATS syncs JetStream lazily") {
		t.Errorf("no warning on stderr:\n%s", ts.stderr.String())
	}
	if m := scrape(t, ts.url); !strings.Contains(m, `wrench_admission_durability{level="memory"} 1`) {
		t.Errorf("metrics:\n%s", grepLines(m, "durability"))
	}
	emb := startServe(t, t.TempDir(), "", nil)
	if m := scrape(t, emb.url); !strings.Contains(m, `wrench_admission_durability{level="fsync"} 1`) {
		t.Errorf("embedded metrics:\n%s", grepLines(m, "durability"))
	}
	if strings.Contains(emb.stderr.String(), "WARNING") {
		t.Errorf("embedded serve warned:\n%s", emb.stderr.String())
	}
}

func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
