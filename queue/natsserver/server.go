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
	// Only the admission benchmark sets it, to measure what syncing costs.
	LazySync bool
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
}

// Server is a running in-process nats-server with JetStream.
type Server struct {
	srv *server.Server
	// self is the server's own user, when it has users.
	self nkeys.KeyPair
}

// Start starts a nats-server with JetStream on a file store under
// cfg.DataDir and waits until it accepts connections (or ctx is done).
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("start nats: DataDir is required")
	}
	store := filepath.Join(cfg.DataDir, "nats")
	if err := os.MkdirAll(store, 0o700); err != nil {
		return nil, fmt.Errorf("start nats: %w", err)
	}
	opts := &server.Options{
		ServerName: "wrench",
		JetStream:  true,
		StoreDir:   store,
		NoSigs:     true,
		NoLog:      cfg.Logger == nil,
		SyncAlways: !cfg.LazySync,
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
	if cfg.Logger != nil {
		srv.SetLoggerV2(slogAdapter{cfg.Logger.With("component", "nats-server")}, false, false, false)
	}
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
	return s, nil
}

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
// is flushed and stays on disk.
func (e *Server) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// slogAdapter routes nats-server logging to slog.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Noticef(f string, v ...any) { a.l.Info(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Warnf(f string, v ...any)   { a.l.Warn(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Fatalf(f string, v ...any)  { a.l.Error(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Errorf(f string, v ...any)  { a.l.Error(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Debugf(f string, v ...any)  { a.l.Debug(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Tracef(f string, v ...any)  { a.l.Debug(fmt.Sprintf(f, v...)) }
