package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/wrenchworks/wrench/queue/natsserver"
)

// natsServerFlags are the flags of `wrench nats-server`.
type natsServerFlags struct {
	name          string
	listen        string
	clusterName   string
	clusterListen string
	routes        string
	storeDir      string
	monitor       string
	sync          string
	userNKey      string
	tlsCert       string
	tlsKey        string
	logLevel      string
}

func (f *natsServerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.name, "name", "", "server name, unique in the cluster (required with --cluster-listen; default wrench)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:4222", "client address `HOST:PORT` (port 0: a free one, printed)")
	fs.StringVar(&f.clusterName, "cluster-name", "wrench", "cluster name, the same on every node (with --cluster-listen)")
	fs.StringVar(&f.clusterListen, "cluster-listen", "", "route address `HOST:PORT` other nodes dial (loopback only; empty: no cluster)")
	fs.StringVar(&f.routes, "routes", "", "route URLs of the other nodes, comma-separated (nats://host:port,…)")
	fs.StringVar(&f.storeDir, "store-dir", "", "JetStream store directory (required; one node per directory)")
	fs.StringVar(&f.monitor, "monitor", "", "HTTP monitoring address `HOST:PORT` (/varz, /jsz; what --nats-monitor and KEDA read)")
	fs.StringVar(&f.sync, "sync", "always", "when JetStream syncs writes to disk: always (before acknowledging them), or every DURATION")
	fs.StringVar(&f.userNKey, "user-nkey", "", "admit only the user whose nkey seed is in `FILE` (written when missing; clients pass --nats-nkey FILE)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate (PEM) clients must connect with (with --tls-key)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "TLS key (PEM) of --tls-cert")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level on stderr: debug, info, warn, error")
}

// config checks the flags and turns them into the server's configuration.
func (f natsServerFlags) config() (natsserver.Config, error) {
	cfg := natsserver.Config{Name: f.name, Listen: f.listen, StoreDir: f.storeDir, MonitorListen: f.monitor}
	if f.storeDir == "" {
		return cfg, errors.New("--store-dir is required")
	}
	if f.listen == "" {
		return cfg, errors.New("--listen is required: a standalone server serves clients over TCP")
	}
	if f.sync != "always" {
		d, err := time.ParseDuration(f.sync)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("--sync %q: want always or a positive duration (2m)", f.sync)
		}
		cfg.LazySync, cfg.SyncInterval = true, d
	}
	if f.clusterListen != "" {
		if f.name == "" {
			return cfg, errors.New("--cluster-listen needs --name, unique in the cluster")
		}
		cfg.Cluster = &natsserver.Cluster{Name: f.clusterName, Listen: f.clusterListen, Routes: splitList(f.routes)}
	} else if f.routes != "" {
		return cfg, errors.New("--routes needs --cluster-listen")
	}
	if f.userNKey != "" {
		pub, err := natsserver.EnsureUserSeed(f.userNKey)
		if err != nil {
			return cfg, fmt.Errorf("--user-nkey: %w", err)
		}
		cfg.NKeys = []string{pub}
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return cfg, errors.New("--tls-cert and --tls-key go together")
	}
	if f.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return cfg, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return cfg, nil
}

// cmdNATSServer runs the nats-server Wrench embeds (the same module
// version) as a process of its own, with JetStream on a file store: a node
// of a three-node cluster for --replicas 3, without installing nats-server.
func cmdNATSServer(ctx context.Context, env *cliEnv, args []string) int {
	var f natsServerFlags
	fs := flag.NewFlagSet("wrench nats-server", flag.ContinueOnError)
	f.register(fs)
	pos, code, ok := parseCommand(env, fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(env.stderr, "wrench nats-server: unexpected argument %q\n", pos[0])
		return exitBadInput
	}
	cfg, err := f.config()
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench nats-server: %v\n", err)
		return exitBadInput
	}
	unlock, err := lockDataDir(f.storeDir)
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench nats-server: %v\n", err)
		return exitBadInput
	}
	defer unlock()
	log := serviceLogger(env, f.logLevel)
	cfg.Logger = log
	srv, err := natsserver.Start(ctx, cfg)
	if err != nil {
		log.Error("nats-server failed to start", "err", err)
		fmt.Fprintf(env.stderr, "wrench nats-server: %v\n", err)
		return exitInfra
	}
	fmt.Fprintf(env.stderr, "wrench nats-server: clients at %s\n", workerURL(srv.ClientURL(), cfg.TLS != nil))
	if u := srv.ClusterURL(); u != "" {
		fmt.Fprintf(env.stderr, "wrench nats-server: routes at %s\n", u)
	}
	if a := srv.MonitorAddr(); a != "" {
		fmt.Fprintf(env.stderr, "wrench nats-server: monitoring at http://%s\n", a)
	}
	<-ctx.Done()
	log.Info("nats-server shutting down")
	srv.Shutdown()
	return exitOK
}
