package natsserver

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/sys/unix"
)

// The store guard of the embedded server. What nats-server v2.15.2 does
// when its disk fills (measured: TestStoreRecoversAfterDiskFull in
// cmd/wrench, queue/natsserver/guard_test.go): a stream whose file store
// fails a write with ENOSPC logs "Critical write error" and keeps the
// error for good: it acknowledges no publish again (clients time out),
// even after the space is back, until JetStream restarts. Streams that
// did not fail a write go on. JetStream itself stays enabled (a clustered
// server disables it instead). The guard watches for both, says so in
// [Server.Health], and once the disk has room again restarts JetStream
// in-process, which reopens every stream from disk without the error.
// Clients stay connected throughout.

// DefaultGuardInterval is how often the guard looks at the store's disk.
const DefaultGuardInterval = 5 * time.Second

// Restarts after a write error back off from guardBackoff up to
// guardMaxBackoff while the error comes back.
const (
	guardBackoff    = 5 * time.Second
	guardMaxBackoff = 5 * time.Minute
)

// guard is the store's health as the embedded server sees it.
type guard struct {
	srv      *server.Server
	storeDir string // JetStream's directory (where the disk is measured)
	// jsConfig is JetStream's configuration at start, with StoreDir as
	// EnableJetStream takes it (the parent of JetStream's directory).
	jsConfig  server.JetStreamConfig
	minFree   int64
	every     time.Duration
	clustered bool
	log       *slog.Logger

	closeOnce sync.Once

	mu       sync.Mutex
	low      error     // the disk has less than minFree free
	writeErr string    // the last write error the server reported, until JetStream restarts
	nextTry  time.Time // no restart before
	backoff  time.Duration

	stop chan struct{}
	wg   sync.WaitGroup
}

func newGuard(srv *server.Server, cfg Config, log *slog.Logger) *guard {
	every := cfg.GuardInterval
	if every <= 0 {
		every = DefaultGuardInterval
	}
	return &guard{srv: srv, minFree: cfg.MinFreeDisk, every: every,
		clustered: cfg.Cluster != nil, log: log, backoff: guardBackoff, stop: make(chan struct{})}
}

// start runs the guard until close, once JetStream is up.
func (g *guard) start() {
	js := *g.srv.JetStreamConfig()
	g.storeDir = js.StoreDir
	js.StoreDir = filepath.Dir(js.StoreDir) // EnableJetStream adds "jetstream"
	g.jsConfig = js
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		tick := time.NewTicker(g.every)
		defer tick.Stop()
		for {
			g.check()
			select {
			case <-g.stop:
				return
			case <-tick.C:
			}
		}
	}()
}

// close stops the guard and waits for it; closing it again does nothing.
func (g *guard) close() {
	g.closeOnce.Do(func() { close(g.stop) })
	g.wg.Wait()
}

// serverError is called with every error line of the server: a write
// error of the store marks it unhealthy until JetStream restarts.
func (g *guard) serverError(msg string) {
	if !isStoreWriteError(msg) {
		return
	}
	g.mu.Lock()
	first := g.writeErr == ""
	g.writeErr = msg
	g.mu.Unlock()
	if first {
		g.log.Error("the NATS store failed a write; it takes no more until JetStream restarts, which happens once the disk has room", "err", msg)
	}
}

// isStoreWriteError says whether a server error line reports a store that
// failed a write: nats-server has no API for it (it tells the same way,
// by the error text, in server/store.go isOutOfSpaceErr).
func isStoreWriteError(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "critical write error") || strings.Contains(m, "no space left on device") ||
		strings.Contains(m, "will be disabled")
}

// check measures the disk and restarts JetStream when it is due.
func (g *guard) check() {
	low := g.lowSpace()
	g.mu.Lock()
	was := g.low
	g.low = low
	faulted := g.writeErr != "" || !g.srv.JetStreamEnabled()
	due := !time.Now().Before(g.nextTry)
	g.mu.Unlock()
	switch {
	case low != nil && was == nil:
		g.log.Error("the NATS store's disk is low; the service is unready until it has room", "err", low)
	case low == nil && was != nil:
		g.log.Warn("the NATS store's disk has room again", "was", was)
	}
	if !faulted && due {
		g.mu.Lock()
		g.backoff = guardBackoff // healthy past the last wait: start over
		g.mu.Unlock()
	}
	if !faulted || low != nil || g.clustered || !due {
		return
	}
	err := g.restart()
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		g.nextTry = time.Now().Add(g.backoff)
		g.backoff = min(2*g.backoff, guardMaxBackoff)
		g.log.Error("restart JetStream after a store write error", "err", err, "retry_in", g.backoff)
		return
	}
	g.log.Warn("JetStream restarted: its streams take writes again", "after", g.writeErr)
	g.writeErr = ""
	g.nextTry = time.Now().Add(g.backoff) // a fault that comes back at once waits
	g.backoff = min(2*g.backoff, guardMaxBackoff)
}

// restart stops JetStream (keeping its state on disk) and starts it again
// with its configuration at start.
func (g *guard) restart() error {
	if g.srv.JetStreamEnabled() {
		if err := g.srv.ShutdownJetStream(); err != nil {
			return fmt.Errorf("stop JetStream: %w", err)
		}
	}
	cfg := g.jsConfig
	if err := g.srv.EnableJetStream(&cfg); err != nil {
		return fmt.Errorf("start JetStream: %w", err)
	}
	return nil
}

// lowSpace is the error for a store disk below minFree, else nil.
func (g *guard) lowSpace() error {
	if g.minFree <= 0 {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(g.storeDir, &st); err != nil {
		return fmt.Errorf("disk of the NATS store %s: %w", g.storeDir, err)
	}
	if free := int64(st.Bavail) * int64(st.Bsize); free < g.minFree {
		return fmt.Errorf("disk of the NATS store %s: %d MiB free, below the %d MiB minimum", g.storeDir, free>>20, g.minFree>>20)
	}
	return nil
}

// health is nil while the store can write.
func (g *guard) health() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	var errs []error
	if g.low != nil {
		errs = append(errs, g.low)
	}
	if g.writeErr != "" {
		errs = append(errs, fmt.Errorf("the NATS store failed a write and takes no more until JetStream restarts: %s", g.writeErr))
	}
	if !g.srv.JetStreamEnabled() {
		errs = append(errs, errors.New("JetStream is disabled"))
	}
	return errors.Join(errs...)
}
