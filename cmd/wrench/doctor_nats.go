package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/queue"
)

// doctorNATSTimeout bounds the NATS checks: a request to a stream whose
// leader just died can go unanswered until a new leader is elected.
const doctorNATSTimeout = 15 * time.Second

// doctorNATS checks the queue at n.url for durability: it fails when a task
// the API accepts could be lost on an OS crash (one replica, lazy sync),
// and warns when it cannot tell. It reports to w and returns whether the
// check passed.
func doctorNATS(ctx context.Context, w io.Writer, n natsFlags) bool {
	ctx, cancel := context.WithTimeout(ctx, doctorNATSTimeout)
	defer cancel()
	conn, err := n.connect(ctx, slog.New(slog.DiscardHandler), false)
	if err != nil {
		fmt.Fprintf(w, "nats         FAIL  %v\n", err)
		return false
	}
	defer conn.Close()
	d, err := conn.Durability(ctx, queue.SyncUnknown, splitList(n.monitors))
	if err != nil {
		fmt.Fprintf(w, "nats         FAIL  %v\n", err)
		return false
	}
	fmt.Fprintf(w, "nats         ok    %s: %d replica(s), sync %s, durability %s\n", conn.URL(), d.Replicas, d.Sync, d.Level())
	ok := true
	switch d.Level() {
	case "memory":
		fmt.Fprintf(w, "durability   FAIL  %s\n", d.Problem())
		ok = false
	case "unknown":
		fmt.Fprintf(w, "durability   WARN  %s\n", d.Problem())
	}
	return doctorCluster(ctx, w, conn) && ok
}

// doctorCluster reports where the queue's replicas are on a cluster: it
// fails when a stream cannot be read (no quorum: admission refuses), warns
// when a replica is behind or offline (one more failure may stop the
// queue) or the streams have one replica on a cluster, and says nothing
// on a single server.
func doctorCluster(ctx context.Context, w io.Writer, conn *queue.Conn) bool {
	ps, err := conn.Placements(ctx)
	if err != nil {
		fmt.Fprintf(w, "cluster      FAIL  %v (a stream without quorum refuses every write)\n", err)
		return false
	}
	if len(ps) == 0 || (ps[0].Cluster == "" && ps[0].Replicas == 1) {
		return true
	}
	healthy, leaders := 0, map[string]bool{}
	for _, p := range ps {
		if p.Healthy() {
			healthy++
			leaders[p.Leader] = true
			continue
		}
		fmt.Fprintf(w, "cluster      WARN  %s: one more server down may stop the queue\n", p)
	}
	if ps[0].Replicas < 3 {
		fmt.Fprintf(w, "cluster      WARN  streams have %d replica(s) on cluster %s: a server down stops the queue; restart serve with --replicas 3\n", ps[0].Replicas, ps[0].Cluster)
	}
	if healthy == len(ps) {
		fmt.Fprintf(w, "cluster      ok    %s: all %d streams have %d of %d replicas current; leaders %s\n",
			ps[0].Cluster, len(ps), ps[0].Replicas, ps[0].Replicas, strings.Join(slices.Sorted(maps.Keys(leaders)), ", "))
	}
	return true
}
