package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/telemetry"
)

// natsFlags say how to join an external NATS: `wrench worker` always does,
// `wrench serve` when --nats is given (instead of embedding a server).
type natsFlags struct {
	url   string
	creds string
}

func (n *natsFlags) register(fs *flag.FlagSet, usage string) {
	fs.StringVar(&n.url, "nats", "", usage)
	fs.StringVar(&n.creds, "nats-creds", "", "NATS credentials file (with --nats)")
}

// check validates the flags; an empty URL is an error only when required.
func (n natsFlags) check(required bool) error {
	if strings.TrimSpace(n.url) == "" {
		if n.creds != "" {
			return errors.New("--nats-creds needs --nats")
		}
		if required {
			return errors.New("--nats URL is required (the NATS that `wrench serve --nats-listen` or your cluster serves)")
		}
		return nil
	}
	if n.creds != "" {
		if _, err := os.Stat(n.creds); err != nil {
			return fmt.Errorf("--nats-creds: %w", err)
		}
	}
	return nil
}

// connect joins the NATS at n.url with Wrench's streams and buckets.
func (n natsFlags) connect(ctx context.Context, log *slog.Logger) (*queue.Conn, error) {
	var opts []nats.Option
	if n.creds != "" {
		opts = append(opts, nats.UserCredentials(n.creds))
	}
	return queue.Connect(ctx, queue.Config{URL: n.url, ConnectOptions: opts,
		Propagator: telemetry.Propagator(), Logger: log})
}

// closeConn flushes what the dispatcher sent last (the Nak that hands a
// task back at shutdown is fire-and-forget) and closes the connection:
// without the flush a handed-back task would wait out its AckWait.
func closeConn(conn *queue.Conn) {
	if err := conn.NATS().FlushTimeout(5 * time.Second); err != nil {
		conn.Logger().Warn("flush nats before close", "err", err)
	}
	conn.Close()
}

// natsReady reports readiness as the NATS connection's state.
func natsReady(conn *queue.Conn) func(context.Context) error {
	return func(context.Context) error {
		if s := conn.NATS().Status(); s != nats.CONNECTED {
			return fmt.Errorf("nats connection is %s", s)
		}
		return nil
	}
}

// lagInterval is how often an API-only serve reports the queue's lag.
const lagInterval = 5 * time.Second

// reportLag sets the queue gauges every lagInterval until ctx is done: a
// process without a dispatcher (serve --slots 0) still shows the queue.
func reportLag(ctx context.Context, conn *queue.Conn, m *telemetry.Metrics, log *slog.Logger) {
	tick := time.NewTicker(lagInterval)
	defer tick.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, lagInterval)
		pending, ackPending, err := conn.QueueLag(qctx)
		cancel()
		if err == nil {
			m.SetConsumerLag(pending, ackPending)
		} else if ctx.Err() == nil {
			log.Debug("read queue lag", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
