package queue

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// EmbeddedConfig configures the NATS server `wrench serve` runs in-process.
type EmbeddedConfig struct {
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
	// Logger receives the server's log; nil discards it.
	Logger *slog.Logger
}

// Embedded is a running in-process nats-server with JetStream.
type Embedded struct {
	srv *server.Server
}

// StartEmbedded starts a nats-server with JetStream on a file store under
// cfg.DataDir and waits until it accepts connections (or ctx is done).
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
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
	}
	if cfg.Listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := splitListen(cfg.Listen)
		if err != nil {
			return nil, err
		}
		opts.Host, opts.Port = host, port
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
	return &Embedded{srv: srv}, nil
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
func (e *Embedded) MonitorAddr() string {
	if a := e.srv.MonitorAddr(); a != nil {
		return a.String()
	}
	return ""
}

// ClientURL is the nats:// URL clients dial; with no TCP listener it is
// empty and clients connect with [Embedded.ConnectOption].
func (e *Embedded) ClientURL() string {
	if e.srv.Addr() == nil {
		return ""
	}
	return e.srv.ClientURL()
}

// ConnectOption connects a client in-process, without TCP: pass it in
// [Config.ConnectOptions].
func (e *Embedded) ConnectOption() nats.Option { return nats.InProcessServer(e.srv) }

// Server returns the underlying server (for monitoring and tests).
func (e *Embedded) Server() *server.Server { return e.srv }

// Shutdown stops the server and waits until it has stopped; the file store
// is flushed and stays on disk.
func (e *Embedded) Shutdown() {
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
