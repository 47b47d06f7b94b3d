package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
	"github.com/wrenchworks/wrench/telemetry"
)

// defaultHTTPAddr is where `wrench serve` listens and where the client
// commands look for it.
const defaultHTTPAddr = "127.0.0.1:7070"

// serviceFlags are the flags `wrench serve` and `wrench worker` share: the
// dispatcher's and the worker's.
type serviceFlags struct {
	common   commonFlags
	slots    int
	perRepo  int
	grace    time.Duration
	warm     int
	image    string
	network  string
	verify   string
	otlp     string
	workerID string
	ackWait  time.Duration
	github   githubFlags
}

func (s *serviceFlags) register(fs *flag.FlagSet, env *cliEnv) {
	s.common.register(fs, env)
	fs.IntVar(&s.slots, "slots", 2, "tasks this process runs at once")
	fs.IntVar(&s.perRepo, "per-repo", 0, "tasks of one repository run at once by this process (0: no cap)")
	fs.DurationVar(&s.grace, "grace", 30*time.Second, "on SIGTERM, how long running tasks may finish before they are handed back")
	fs.IntVar(&s.warm, "warm", 0, "sandboxes kept warm for the next tasks (pool size)")
	fs.StringVar(&s.image, "image", "", "default sandbox image (default "+defaultImage+")")
	fs.StringVar(&s.network, "network", "", "default sandbox network: none (default) or bridge")
	fs.StringVar(&s.verify, "verify", "finish", "when agents run the tests: finish, after_write or never")
	fs.StringVar(&s.otlp, "otlp-endpoint", "", "OTLP/HTTP base URL for traces, spans go to its /v1/traces (default $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, or $OTEL_EXPORTER_OTLP_ENDPOINT; with none of them, no tracing)")
	fs.StringVar(&s.workerID, "worker-id", "", "name of this worker in task states (default host-pid)")
	s.github.register(fs, env)
	fs.DurationVar(&s.ackWait, "ack-wait", dispatcher.DefaultAckWait, "how long a task whose worker went silent waits before another worker gets it")
}

// check validates the flags; minSlots is 0 for serve (API only) and 1 for
// worker.
func (s *serviceFlags) check(minSlots int) error {
	if s.slots < minSlots {
		return fmt.Errorf("--slots must be at least %d, got %d", minSlots, s.slots)
	}
	if s.grace < 0 {
		return fmt.Errorf("--grace must not be negative")
	}
	if s.ackWait < time.Second {
		return fmt.Errorf("--ack-wait must be at least 1s, got %s", s.ackWait)
	}
	switch agent.VerifyPolicy(s.verify) {
	case agent.VerifyOnFinish, agent.VerifyAfterWrite, agent.VerifyNever:
	default:
		return fmt.Errorf("--verify %q is not one of finish, after_write, never", s.verify)
	}
	return nil
}

func (s *serviceFlags) workerOptions() workerOptions {
	return workerOptions{common: s.common, image: s.image, verify: agent.VerifyPolicy(s.verify),
		network: s.network, warm: s.warm, deployment: s.common.deployment}
}

// serveFlags are the flags of `wrench serve`.
type serveFlags struct {
	service    serviceFlags
	httpAddr   string
	natsListen string
	nats       natsFlags
	token      string
	maxBody    int64
	// githubSecret enables the GitHub webhook.
	githubSecret string
}

// check validates what serve adds to the service flags.
func (f *serveFlags) check() error {
	if err := f.service.check(0); err != nil {
		return err
	}
	if err := f.nats.check(false); err != nil {
		return err
	}
	external := f.nats.url != ""
	if external && f.natsListen != "" {
		return errors.New("--nats joins an external NATS and --nats-listen serves the embedded one: give one of them")
	}
	if f.service.slots == 0 && !external && f.natsListen == "" {
		return errors.New("--slots 0 runs no tasks here: give --nats-listen (or --nats) so that workers can run them")
	}
	return checkExposure(f.httpAddr, f.token)
}

func cmdServe(ctx context.Context, env *cliEnv, args []string) int {
	var f serveFlags
	fs := flag.NewFlagSet("wrench serve", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	f.service.register(fs, env)
	fs.StringVar(&f.httpAddr, "http", defaultHTTPAddr, "HTTP API, /metrics and health address")
	fs.StringVar(&f.natsListen, "nats-listen", "", "also serve the embedded NATS on this address so `wrench worker` can join (default: in-process only)")
	f.nats.register(fs, "join this external NATS (URLs comma-separated for a cluster) instead of embedding one")
	fs.StringVar(&f.token, "token", env.getenv("WRENCH_API_TOKEN"), "bearer token the API requires (default $WRENCH_API_TOKEN; required off loopback)")
	fs.Int64Var(&f.maxBody, "max-body", api.DefaultMaxBody, "largest accepted request body, in bytes")
	fs.StringVar(&f.githubSecret, "github-webhook-secret", env.getenv("WRENCH_GITHUB_WEBHOOK_SECRET"), "serve POST /webhooks/github, verifying deliveries with this secret (default $WRENCH_GITHUB_WEBHOOK_SECRET; none: no webhook)")
	if err := fs.Parse(args); err != nil {
		return exitBadInput
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "wrench serve: unexpected argument %q\n", fs.Arg(0))
		return exitBadInput
	}
	if err := f.check(); err != nil {
		fmt.Fprintf(env.stderr, "wrench serve: %v\n", err)
		return exitBadInput
	}
	ln, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench serve: listen on %s: %v\n", f.httpAddr, err)
		return exitInfra
	}
	defer ln.Close()
	// With no slots this process runs no task: it needs no worker, so no
	// Docker engine and no workspaces.
	var runner dispatcher.Runner
	if f.service.slots > 0 {
		w, cleanup, err := newWorker(ctx, env, f.service.workerOptions())
		if err != nil {
			fmt.Fprintf(env.stderr, "wrench serve: %v\n", err)
			return exitCodeFor(err)
		}
		defer cleanup()
		if runner, err = f.service.github.wrap(w, f.service.common, env); err != nil {
			fmt.Fprintf(env.stderr, "wrench serve: %v\n", err)
			return exitBadInput
		}
	}
	return serve(ctx, env, f, runner, ln)
}

// checkExposure refuses an API reachable from other machines without a
// token.
func checkExposure(addr, token string) error {
	if token != "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--http %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--http %s is not a loopback address, and the API would accept anyone: "+
		"set a bearer token with --token or WRENCH_API_TOKEN (or listen on 127.0.0.1)", addr)
}

// serve runs the queue (the embedded NATS, or the external one of --nats),
// the dispatcher feeding runner (none when runner is nil: API only), and
// the HTTP API on ln until ctx is done, then shuts down in order: the
// dispatcher (running tasks get --grace), the API, the connection, NATS.
func serve(ctx context.Context, env *cliEnv, f serveFlags, runner dispatcher.Runner, ln net.Listener) int {
	log := serviceLogger(env, f.service.common.logLevel)
	fail := func(err error) int {
		log.Error("serve failed", "err", err)
		fmt.Fprintf(env.stderr, "wrench serve: %v\n", err)
		return exitInfra
	}
	tel, err := newServiceTelemetry(ctx, env, f.service, log)
	if err != nil {
		return fail(err)
	}
	defer tel.shutdown()

	var conn *queue.Conn
	var where string
	if f.nats.url != "" {
		if conn, err = f.nats.connect(ctx, log); err != nil {
			return fail(err)
		}
		where = "queue on " + conn.NATS().ConnectedUrlRedacted()
	} else {
		dataDir, err := f.service.common.resolvedDataDir()
		if err != nil {
			return fail(err)
		}
		emb, err := queue.StartEmbedded(ctx, queue.EmbeddedConfig{DataDir: dataDir, Listen: f.natsListen, Logger: log})
		if err != nil {
			return fail(err)
		}
		defer emb.Shutdown()
		conn, err = queue.Connect(ctx, queue.Config{
			ConnectOptions: []nats.Option{emb.ConnectOption()},
			Propagator:     telemetry.Propagator(),
			Logger:         log,
		})
		if err != nil {
			return fail(err)
		}
		where = "data in " + dataDir
		if emb.ClientURL() != "" {
			fmt.Fprintf(env.stderr, "wrench serve: NATS for workers at %s\n", emb.ClientURL())
		}
	}
	defer closeConn(conn)

	var d *dispatcher.Dispatcher
	if runner != nil {
		if d, err = dispatcher.New(conn, runner, tel.dispatcherConfig(f.service, log)); err != nil {
			return fail(err)
		}
	}
	backend := countingBackend{Conn: conn, m: tel.metrics}
	srv, err := api.NewServer(api.Config{
		Backend:        apiBackend{backend},
		Token:          f.token,
		MaxBody:        f.maxBody,
		Logger:         log.With("component", "api"),
		Metrics:        telemetry.Handler(tel.registry),
		Ready:          natsReady(conn),
		TracerProvider: tel.tp,
		Propagator:     telemetry.Propagator(),
		ObserveRequest: tel.metrics.HTTPRequest,
	})
	if err != nil {
		return fail(err)
	}
	if err := f.service.github.mountWebhook(srv, f.githubSecret, backend, env, f.service.common); err != nil {
		return fail(err)
	}
	slots := fmt.Sprintf("%d slots", f.service.slots)
	if d == nil {
		slots = "API only, no slots"
	}
	fmt.Fprintf(env.stderr, "wrench serve: API on http://%s (%s, %s)\n", ln.Addr(), where, slots)
	log.Info("serving", "http", ln.Addr().String(), "nats", conn.NATS().ConnectedUrlRedacted(), "slots", f.service.slots)
	if d == nil {
		return runAPI(ctx, log, conn, tel.metrics, srv, ln)
	}
	return runService(ctx, log, d, srv, ln)
}

// runAPI serves h on ln, with no dispatcher, until ctx is done or the
// server fails; meanwhile it reports the queue's lag in the metrics.
func runAPI(ctx context.Context, log *slog.Logger, conn *queue.Conn, m *telemetry.Metrics, h http.Handler, ln net.Listener) int {
	lagCtx, stopLag := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { reportLag(lagCtx, conn, m, log) })
	defer func() {
		stopLag()
		wg.Wait()
	}()
	return runService(ctx, log, nil, h, ln)
}

// runService runs the dispatcher (when d is not nil) and, when ln is not
// nil, an HTTP server on it until ctx is done or either fails; then it stops
// the dispatcher first (it drains: running tasks get their grace) while the
// API keeps answering, and then the HTTP server (open event streams are
// ended).
func runService(ctx context.Context, log *slog.Logger, d *dispatcher.Dispatcher, h http.Handler, ln net.Listener) int {
	// Requests see a context that is cancelled at shutdown, so event
	// streams end instead of holding Shutdown up.
	reqCtx, cancelReqs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReqs()
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return reqCtx },
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn)}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	dispDone := make(chan error, 1)
	httpDone := make(chan error, 1)
	if d != nil {
		go func() {
			dispDone <- d.Run(runCtx)
			stop()
		}()
	} else {
		dispDone <- nil
	}
	if ln != nil {
		go func() {
			err := hs.Serve(ln)
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			httpDone <- err
			stop()
		}()
	} else {
		httpDone <- nil
	}
	<-runCtx.Done()
	if d != nil {
		log.Info("shutting down: draining tasks")
	} else {
		log.Info("shutting down")
	}
	dErr := <-dispDone
	cancelReqs()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	hErr := <-httpDone
	if err := errors.Join(dErr, hErr); err != nil {
		log.Error("service failed", "err", err)
		return exitInfra
	}
	log.Info("stopped")
	return exitOK
}

// countingBackend counts accepted submissions in the metrics.
type countingBackend struct {
	*queue.Conn
	m *telemetry.Metrics
}

func (b countingBackend) Submit(ctx context.Context, t task.Task) (task.Status, bool, error) {
	st, dup, err := b.Conn.Submit(ctx, t)
	if err == nil && !dup {
		b.m.TaskSubmitted(t.Source.Kind)
	}
	return st, dup, err
}
