package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"

	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/telemetry"
)

// workerFlags are the flags of `wrench worker`.
type workerFlags struct {
	service  serviceFlags
	nats     natsFlags
	httpAddr string
}

func cmdWorker(ctx context.Context, env *cliEnv, args []string) int {
	var f workerFlags
	fs := flag.NewFlagSet("wrench worker", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	f.service.register(fs, env)
	f.nats.register(fs, "NATS server URL(s), comma-separated for a cluster (required; default $WRENCH_NATS_URL)")
	f.nats.layout.register(fs)
	fs.StringVar(&f.httpAddr, "http", "127.0.0.1:7071", "address of /metrics, /healthz and /readyz (empty: none)")
	pos, code, ok := parseCommand(env, fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(env.stderr, "wrench worker: unexpected argument %q\n", pos[0])
		return exitBadInput
	}
	if f.nats.url == "" {
		f.nats.url = env.getenv("WRENCH_NATS_URL")
	}
	if err := errors.Join(f.nats.check(true), f.service.check(1)); err != nil {
		fmt.Fprintf(env.stderr, "wrench worker: %v\n", err)
		return exitBadInput
	}
	gh, err := f.service.github.open(f.service.common.logger(env))
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench worker: %v\n", err)
		return exitBadInput
	}
	w, cleanup, err := newWorker(ctx, env, f.service.workerOptions(gh, true))
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench worker: %v\n", err)
		return exitCodeFor(err)
	}
	defer cleanup()
	if err := gh.usePolicy(f.service.workerOptions(gh, true)); err != nil {
		fmt.Fprintf(env.stderr, "wrench worker: %v\n", err)
		return exitBadInput
	}
	f.service.gh = gh
	return runWorker(ctx, env, f, w)
}

// runWorker joins the NATS at f.natsURL and runs tasks with runner until
// ctx is done.
func runWorker(ctx context.Context, env *cliEnv, f workerFlags, runner dispatcher.Runner) int {
	log := serviceLogger(env, f.service.common.logLevel)
	fail := func(err error) int {
		log.Error("worker failed", "err", err)
		fmt.Fprintf(env.stderr, "wrench worker: %v\n", err)
		return exitInfra
	}
	tel, err := newServiceTelemetry(ctx, env, f.service, log)
	if err != nil {
		return fail(err)
	}
	defer tel.shutdown()
	conn, err := f.nats.connect(ctx, log, false)
	if err != nil {
		return fail(err)
	}
	defer conn.Close()
	reportDurability(ctx, env, "wrench worker", log, conn, queue.SyncUnknown, splitList(f.nats.monitors), tel.metrics)
	f.service.link.connect(ctx, conn, tel.metrics, log)
	defer watchPolicyReload(ctx, f.service.link, log)()
	dcfg, err := tel.dispatcherConfig(f.service, log)
	if err != nil {
		return fail(err)
	}
	if dcfg.Finalizer, err = f.service.gh.finalizer(conn, dcfg.WorkerID, f.service.ackWait, f.service.common, env); err != nil {
		return fail(err)
	}
	d, err := dispatcher.New(dispatcher.NATS(conn), runner, dcfg)
	if err != nil {
		return fail(err)
	}
	var ln net.Listener
	mux := http.NewServeMux()
	if f.httpAddr != "" {
		mux.Handle("GET /metrics", telemetry.Handler(tel.registry))
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		ready := storeReady(conn, nil)
		mux.HandleFunc("GET /readyz", readyHandler(func(ctx context.Context) error { return errors.Join(ready(ctx), d.Ready()) }))
		if ln, err = net.Listen("tcp", f.httpAddr); err != nil {
			return fail(fmt.Errorf("listen on %s: %w", f.httpAddr, err))
		}
		fmt.Fprintf(env.stderr, "wrench worker: metrics on http://%s/metrics\n", ln.Addr())
	}
	warnNoModelKey(env, "wrench worker")
	fmt.Fprintf(env.stderr, "wrench worker: %s joined %s with %d slots\n", d.WorkerID(), conn.URL(), f.service.slots)
	return runService(ctx, log, d, mux, ln)
}

// readyHandler answers a readiness probe: 200 "ready" while ready returns
// nil, 503 with the reason otherwise.
func readyHandler(ready func(context.Context) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := ready(r.Context()); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	}
}
