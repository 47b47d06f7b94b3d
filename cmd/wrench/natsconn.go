package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/telemetry"
)

// natsFlags say how to join an external NATS (`wrench worker` always does,
// `wrench serve` when --nats is given instead of embedding a server) and
// how the queue's streams and stores are laid out there.
type natsFlags struct {
	url      string
	creds    string
	nkey     string
	ca       string
	monitors string
	layout   layoutFlags
}

func (n *natsFlags) register(fs *flag.FlagSet, usage string) {
	fs.StringVar(&n.url, "nats", "", usage)
	fs.StringVar(&n.creds, "nats-creds", "", "NATS credentials file (with --nats)")
	fs.StringVar(&n.nkey, "nats-nkey", "", "NATS user nkey seed file to sign in with (with --nats; wrench serve --nats-listen writes one for its workers)")
	fs.StringVar(&n.ca, "nats-ca", "", "CA certificate (PEM) to trust for the NATS server's TLS (with --nats; wrench serve writes one when it listens beyond loopback)")
	fs.StringVar(&n.monitors, "nats-monitor", "", "monitoring endpoints of the NATS servers (http://host:8222, comma-separated), to check that they sync writes to disk (with --nats)")
}

// layoutFlags are the replicas and retention of the queue's streams and
// stores. `wrench serve` applies them; `wrench worker` uses them only to
// create what is missing.
type layoutFlags struct {
	replicas  int
	retention queue.Retention
}

func (l *layoutFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&l.replicas, "replicas", 1, "replicas of every stream, the state bucket and the artifact store (3 on a three-node cluster)")
	fs.DurationVar(&l.retention.StateMaxAge, "state-max-age", queue.DefaultStateMaxAge, "how long a task's state is kept after its last change (negative: forever)")
	l.retention.StateMaxBytes = queue.DefaultStateMaxBytes
	fs.Var((*byteSize)(&l.retention.StateMaxBytes), "state-max-bytes", "size cap of the state store, oldest dropped first (KiB, MiB, GiB; negative: none)")
	fs.DurationVar(&l.retention.ArtifactsMaxAge, "artifacts-max-age", queue.DefaultArtifactsMaxAge, "how long a task's artifacts (patch, trajectory, logs) are kept (negative: forever)")
	l.retention.ArtifactsMaxBytes = queue.DefaultArtifactsMaxBytes
	fs.Var((*byteSize)(&l.retention.ArtifactsMaxBytes), "artifacts-max-bytes", "size cap of the artifact store, oldest dropped first (KiB, MiB, GiB; negative: none)")
}

func (l layoutFlags) check() error {
	if l.replicas < 1 || l.replicas > 5 {
		return fmt.Errorf("--replicas must be 1..5 (JetStream's limit), got %d", l.replicas)
	}
	return nil
}

// config is the queue configuration of these flags; apply says whether
// this process owns the layout.
func (l layoutFlags) config(log *slog.Logger, apply bool) queue.Config {
	return queue.Config{Replicas: l.replicas, Retention: l.retention, ApplyLayout: apply,
		Propagator: telemetry.Propagator(), Logger: log}
}

// check validates the flags; an empty URL is an error only when required.
func (n natsFlags) check(required bool) error {
	if err := n.layout.check(); err != nil {
		return err
	}
	if strings.TrimSpace(n.url) == "" {
		if n.creds != "" || n.nkey != "" || n.ca != "" {
			return errors.New("--nats-creds, --nats-nkey and --nats-ca need --nats")
		}
		if required {
			return errors.New("--nats URL is required (the NATS that `wrench serve --nats-listen` or your cluster serves)")
		}
		return nil
	}
	if n.creds != "" && n.nkey != "" {
		return errors.New("--nats-creds and --nats-nkey are two ways to sign in: give one")
	}
	for flag, f := range map[string]string{"--nats-creds": n.creds, "--nats-nkey": n.nkey, "--nats-ca": n.ca} {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
	}
	return nil
}

// options are the connect options of the credential flags.
func (n natsFlags) options() ([]nats.Option, error) {
	var opts []nats.Option
	if n.creds != "" {
		opts = append(opts, nats.UserCredentials(n.creds))
	}
	if n.nkey != "" {
		o, err := nats.NkeyOptionFromSeed(n.nkey)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey: %w", err)
		}
		opts = append(opts, o)
	}
	if n.ca != "" {
		opts = append(opts, nats.RootCAs(n.ca))
	}
	return opts, nil
}

// connect joins the NATS at n.url with Wrench's streams and buckets; apply
// says whether this process owns their layout (serve does, workers don't).
func (n natsFlags) connect(ctx context.Context, log *slog.Logger, apply bool) (*queue.Conn, error) {
	cfg := n.layout.config(log, apply)
	cfg.URL = n.url
	opts, err := n.options()
	if err != nil {
		return nil, err
	}
	cfg.ConnectOptions = append(cfg.ConnectOptions, opts...)
	return queue.Connect(ctx, cfg)
}

// byteSize is a flag.Value of a size in bytes: a number with an optional
// KiB, MiB, GiB or TiB suffix; negative means no limit.
type byteSize int64

var sizeUnits = []struct {
	suffix string
	shift  uint
}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}

func (b *byteSize) Set(s string) error {
	s = strings.TrimSpace(s)
	shift := uint(0)
	for _, u := range sizeUnits {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			s, shift = strings.TrimSpace(num), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || (n > 0 && n > (1<<62)>>shift) {
		return fmt.Errorf("%q is not a size: want bytes, or a number with KiB, MiB, GiB or TiB", s)
	}
	*b = byteSize(n << shift)
	return nil
}

func (b *byteSize) String() string {
	if b == nil || *b == 0 {
		return ""
	}
	n := int64(*b)
	for _, u := range sizeUnits {
		if n > 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// lagInterval is how often an API-only serve reports the queue's lag.
const lagInterval = 5 * time.Second

// reportLag sets the queue gauges every lagInterval until ctx is done: a
// process without a dispatcher (serve --slots 0) still shows the queue.
func reportLag(ctx context.Context, work *queue.Work, m *telemetry.Metrics, log *slog.Logger) {
	tick := time.NewTicker(lagInterval)
	defer tick.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, lagInterval)
		pending, ackPending, err := work.Lag(qctx)
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
