// Package natsserver runs the nats-server with JetStream that `wrench serve`
// embeds. It is apart from package queue so that clients of the queue (the
// API, the CLI's client commands) do not link a server.
package natsserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Config configures the NATS server `wrench serve` runs in-process.
type Config struct {
	// DataDir holds the JetStream file store (under DataDir/nats). Starting
	// again on the same DataDir keeps every task and result.
	DataDir string
	// StoreDir, when set, is the JetStream store directory itself, in
	// place of DataDir/nats (`wrench nats-server --store-dir`).
	StoreDir string
	// Name is the server's name ("wrench" when empty); every node of a
	// cluster needs its own.
	Name string
	// Cluster, when set, makes the server a node of a cluster.
	Cluster *Cluster
	// Listen is the client address "host:port" ("127.0.0.1:0" picks a free
	// port); empty means in-process connections only, no TCP listener.
	Listen string
	// MonitorListen, when set, serves the server's HTTP monitoring
	// endpoints (/varz, /jsz: what KEDA's NATS JetStream scaler reads) on
	// "host:port".
	MonitorListen string
	// LazySync leaves JetStream's default of syncing the file store to disk
	// every two minutes. By default every write is synced before it is
	// acknowledged (sync_interval: always), so a task the API accepted
	// survives an OS crash or a power loss, not only a crash of wrench.
	// Only the admission benchmark sets it, to measure what syncing costs,
	// and `wrench nats-server --sync DURATION`.
	LazySync bool
	// SyncInterval is how often a LazySync server syncs (JetStream's
	// default of two minutes when zero).
	SyncInterval time.Duration
	// NKeys are the public keys of the users who may connect (see
	// [EnsureUserSeed]). When set, every client must sign in as one of them
	// or as the server's own user (in-process connections made with
	// [Server.ConnectOption]); unauthenticated clients are refused.
	NKeys []string
	// TLS, when set, is required of every client connecting over TCP.
	// Listening beyond loopback needs both NKeys and TLS
	// ([ErrInsecureListen]).
	TLS *tls.Config
	// Logger receives the server's log; nil discards it.
	Logger *slog.Logger
	// MinFreeDisk is the free space the store's disk needs; below it,
	// [Server.Health] fails (0: not checked).
	MinFreeDisk int64
	// GuardInterval is how often the store's disk is measured and a
	// JetStream that lost its writes is restarted (DefaultGuardInterval
	// when zero).
	GuardInterval time.Duration
}

// Server is a running in-process nats-server with JetStream.
type Server struct {
	srv *server.Server
	// self is the server's own user, when it has users.
	self  nkeys.KeyPair
	guard *guard
}

// Start starts a nats-server with JetStream on a file store under
// cfg.DataDir and waits until it accepts connections (or ctx is done).
func Start(ctx context.Context, cfg Config) (*Server, error) {
	store := cfg.StoreDir
	switch {
	case store != "":
	case cfg.DataDir != "":
		store = filepath.Join(cfg.DataDir, "nats")
	default:
		return nil, fmt.Errorf("start nats: DataDir or StoreDir is required")
	}
	if err := os.MkdirAll(store, 0o700); err != nil {
		return nil, fmt.Errorf("start nats: %w", err)
	}
	name := cfg.Name
	if name == "" {
		name = "wrench"
	}
	opts := &server.Options{
		ServerName: name,
		JetStream:  true,
		StoreDir:   store,
		NoSigs:     true,
		NoLog:      cfg.Logger == nil,
		SyncAlways: !cfg.LazySync,
	}
	if cfg.LazySync {
		opts.SyncInterval = cfg.SyncInterval
	}
	if cfg.Cluster != nil {
		if err := cfg.Cluster.apply(cfg.Name, opts); err != nil {
			return nil, err
		}
	}
	if cfg.Listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := splitListen(cfg.Listen)
		if err != nil {
			return nil, err
		}
		if !isLoopback(host) && (len(cfg.NKeys) == 0 || cfg.TLS == nil) {
			return nil, fmt.Errorf("start nats on %s: %w", cfg.Listen, ErrInsecureListen)
		}
		opts.Host, opts.Port = host, port
	}
	s := &Server{}
	if err := s.authOptions(cfg, opts); err != nil {
		return nil, err
	}
	if cfg.MonitorListen != "" {
		host, port, err := splitListen(cfg.MonitorListen)
		if err != nil {
			return nil, err
		}
		opts.HTTPHost, opts.HTTPPort = host, port
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("start nats: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "nats-server")
	s.guard = newGuard(srv, cfg, log)
	// Always: the guard reads the server's error lines.
	srv.SetLoggerV2(slogAdapter{l: log, onError: s.guard.serverError}, false, false, false)
	go srv.Start()
	deadline := 30 * time.Second
	if d, ok := ctx.Deadline(); ok {
		deadline = time.Until(d)
	}
	if !srv.ReadyForConnections(deadline) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("start nats: server not ready after %s", deadline)
	}
	s.srv = srv
	s.guard.start()
	return s, nil
}

// Health reports nil while the store can write; else why not: its disk is
// below Config.MinFreeDisk, it failed a write (until JetStream restarts,
// which the server does by itself once the disk has room; a cluster node
// does not), or JetStream is disabled.
func (e *Server) Health() error { return e.guard.health() }

// splitListen parses "host:port"; port 0 picks a free port.
func splitListen(addr string) (string, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("start nats: listen address %q: %w", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return "", 0, fmt.Errorf("start nats: listen port %q is not a port number", port)
	}
	if p == 0 {
		p = server.RANDOM_PORT
	}
	return host, p, nil
}

// MonitorAddr is the address of the monitoring endpoint, or "" without one.
func (e *Server) MonitorAddr() string {
	if a := e.srv.MonitorAddr(); a != nil {
		return a.String()
	}
	return ""
}

// ClientURL is the nats:// URL clients dial; with no TCP listener it is
// empty and clients connect with [Server.ConnectOption].
func (e *Server) ClientURL() string {
	if e.srv.Addr() == nil {
		return ""
	}
	return e.srv.ClientURL()
}

// ConnectOption connects a client in-process, without TCP, signed in as
// the server's own user when it has users: pass it in
// queue.Config.ConnectOptions.
func (e *Server) ConnectOption() nats.Option {
	sign := e.signIn()
	return func(o *nats.Options) error {
		if err := nats.InProcessServer(e.srv)(o); err != nil {
			return err
		}
		return sign(o)
	}
}

// SyncAlways reports whether the server syncs every write to disk before
// acknowledging it.
func (e *Server) SyncAlways() bool { return e.srv.JetStreamConfig().SyncAlways }

// Server returns the underlying server (for monitoring and tests).
func (e *Server) Server() *server.Server { return e.srv }

// Shutdown stops the server and waits until it has stopped; the file store
// is flushed and stays on disk. Calling it again does nothing more.
func (e *Server) Shutdown() {
	e.guard.close()
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// slogAdapter routes nats-server logging to slog, and its error lines to
// onError too.
type slogAdapter struct {
	l       *slog.Logger
	onError func(msg string)
}

func (a slogAdapter) Noticef(f string, v ...any) { a.l.Info(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Warnf(f string, v ...any)   { a.l.Warn(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Fatalf(f string, v ...any)  { a.error(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Errorf(f string, v ...any)  { a.error(fmt.Sprintf(f, v...)) }

func (a slogAdapter) error(msg string) {
	a.l.Error(msg)
	a.onError(msg)
}
func (a slogAdapter) Debugf(f string, v ...any) { a.l.Debug(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Tracef(f string, v ...any) { a.l.Debug(fmt.Sprintf(f, v...)) }

// ClusterURL is the nats:// URL other nodes route to, or "" when the
// server is not a cluster node.
func (e *Server) ClusterURL() string {
	if a := e.srv.ClusterAddr(); a != nil {
		return "nats://" + a.String()
	}
	return ""
}
