package queue_test

import (
	"context"
	"testing"

	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/queue/natsserver"
)

func TestPlacementString(t *testing.T) {
	for _, c := range []struct {
		p       queue.Placement
		healthy bool
		want    string
	}{
		{queue.Placement{Stream: "S", Replicas: 3, Leader: "n1", Current: []string{"n1", "n2", "n3"}}, true, "S: 3 of 3 current (n1*, n2, n3)"},
		{queue.Placement{Stream: "S", Replicas: 3, Leader: "n2", Current: []string{"n2", "n1"}, Behind: []string{"n3"}}, false, "S: 2 of 3 current (n2*, n1), behind: n3"},
		{queue.Placement{Stream: "S", Replicas: 3}, false, "S: no leader (0 of 3 replicas reachable): writes are refused"},
	} {
		if got := c.p.String(); got != c.want || c.p.Healthy() != c.healthy {
			t.Errorf("%+v: %q healthy=%v, want %q healthy=%v", c.p, got, c.p.Healthy(), c.want, c.healthy)
		}
	}
}

// On a single server every stream of the queue has its one replica
// current.
func TestPlacementsSingleServer(t *testing.T) {
	c := natstest.Connect(t, natstest.Start(t, natsserver.Config{}))
	ps, err := c.Placements(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != len(queue.QueueStreams) {
		t.Fatalf("%d placements, want %d", len(ps), len(queue.QueueStreams))
	}
	for _, p := range ps {
		if !p.Healthy() || p.Replicas != 1 || p.Cluster != "" {
			t.Errorf("%+v: want one healthy replica, no cluster", p)
		}
	}
}
