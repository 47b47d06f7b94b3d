package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/wrenchworks/wrench/queue"
)

// doctorNATS checks the queue at n.url for durability: it fails when a task
// the API accepts could be lost on an OS crash (one replica, lazy sync),
// and warns when it cannot tell. It reports to w and returns whether the
// check passed.
func doctorNATS(ctx context.Context, w io.Writer, n natsFlags) bool {
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
	switch d.Level() {
	case "memory":
		fmt.Fprintf(w, "durability   FAIL  %s\n", d.Problem())
		return false
	case "unknown":
		fmt.Fprintf(w, "durability   WARN  %s\n", d.Problem())
	}
	return true
}
