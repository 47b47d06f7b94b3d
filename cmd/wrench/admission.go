package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/telemetry"
)

// reportDurability reads what a task the API accepted survives, exports it
// as wrench_admission_durability, and warns loudly (log and stderr) when a
// crash of the server's OS could lose accepted tasks. known is the embedded
// server's sync setting (SyncUnknown for an external NATS).
func reportDurability(ctx context.Context, env *cliEnv, cmd string, log *slog.Logger, conn *queue.Conn,
	known queue.Sync, monitors []string, m *telemetry.Metrics) queue.Durability {
	d, err := conn.Durability(ctx, known, monitors)
	if err != nil {
		log.Warn("read queue durability", "err", err)
		d.Sync = queue.SyncUnknown
	}
	m.SetAdmissionDurability(d.Level())
	if p := d.Problem(); p != "" {
		log.Warn("accepted tasks are not durable", "durability", d.Level(), "replicas", d.Replicas, "sync", d.Sync, "problem", p)
		fmt.Fprintf(env.stderr, "%s: WARNING: %s\n", cmd, p)
	} else {
		log.Info("admission durability", "durability", d.Level(), "replicas", d.Replicas, "sync", d.Sync)
	}
	return d
}

// Sweeping: a task recorded queued whose message is missing for longer than
// sweepMinAge is queued again, looked for every sweepInterval.
const (
	sweepInterval = time.Minute
	sweepMinAge   = time.Minute
)

// startSweeper runs the queue's sweeper until the returned stop is called.
func startSweeper(ctx context.Context, subs *queue.Submissions, m *telemetry.Metrics, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(sweepInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			n, err := subs.Sweep(ctx, sweepMinAge)
			if n > 0 {
				m.QueueRepaired("lost_message", n)
				log.Warn("queued tasks had no queue message; queued again", "tasks", n)
			}
			if err != nil && ctx.Err() == nil {
				log.Warn("sweep the queue", "err", err)
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}
