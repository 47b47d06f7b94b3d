package queue_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/queue/natsserver"
)

func TestDurabilityLevel(t *testing.T) {
	for _, c := range []struct {
		d       queue.Durability
		level   string
		problem bool
	}{
		{queue.Durability{Replicas: 1, Sync: queue.SyncAlways}, "fsync", false},
		{queue.Durability{Replicas: 3, Sync: queue.SyncAlways}, "fsync", false},
		{queue.Durability{Replicas: 3, Sync: queue.SyncLazy}, "replicated", false},
		{queue.Durability{Replicas: 3, Sync: queue.SyncUnknown}, "replicated", false},
		{queue.Durability{Replicas: 1, Sync: queue.SyncLazy}, "memory", true},
		{queue.Durability{Replicas: 1, Sync: queue.SyncUnknown}, "unknown", true},
	} {
		if got := c.d.Level(); got != c.level {
			t.Errorf("%+v: level %q, want %q", c.d, got, c.level)
		}
		if p := c.d.Problem(); (p != "") != c.problem || (c.problem && !strings.Contains(p, "sync_interval: always")) {
			t.Errorf("%+v: problem %q", c.d, p)
		}
	}
}

// The sync setting is read from the servers' monitoring endpoints: the
// embedded server syncs always, a server with JetStream's default syncs
// lazily, and without an endpoint (or system credentials) it is unknown.
func TestDurabilityProbe(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		lazy    bool
		monitor bool
		want    queue.Sync
	}{
		{"embedded", false, true, queue.SyncAlways},
		{"lazy", true, true, queue.SyncLazy},
		{"no monitor", false, false, queue.SyncUnknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := natsserver.Config{LazySync: c.lazy}
			if c.monitor {
				cfg.MonitorListen = "127.0.0.1:0"
			}
			s := natstest.Start(t, cfg)
			if s.SyncAlways() == c.lazy {
				t.Fatalf("SyncAlways = %v with LazySync %v", s.SyncAlways(), c.lazy)
			}
			conn := connect(t, s)
			var monitors []string
			if c.monitor {
				monitors = []string{s.MonitorAddr()}
			}
			d, err := conn.Durability(ctx, queue.SyncUnknown, monitors)
			if err != nil {
				t.Fatal(err)
			}
			if d.Sync != c.want || d.Replicas != 1 {
				t.Fatalf("durability = %+v, want sync %s and 1 replica", d, c.want)
			}
		})
	}
}
