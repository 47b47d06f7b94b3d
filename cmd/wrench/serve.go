package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/queue/natsserver"
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
	minFree  string
	github   githubFlags
	// gh is the GitHub connection opened from the github flags (nil
	// when GitHub is not configured).
	gh *githubConn
	// link is what the worker learns once the queue is open.
	link *queueLink
}

func (s *serviceFlags) register(fs *flag.FlagSet, env *cliEnv) {
	s.link = &queueLink{}
	s.common.register(fs, env)
	fs.IntVar(&s.slots, "slots", 2, "tasks this process runs at once")
	fs.IntVar(&s.perRepo, "per-repo", 0, "tasks of one repository run at once by this process (0: no cap)")
	fs.DurationVar(&s.grace, "grace", 30*time.Second, "on SIGTERM, how long running tasks may finish before they are handed back")
	fs.IntVar(&s.warm, "warm", 0, "keep a ready sandbox of each of the N most recently used environment snapshots")
	fs.StringVar(&s.image, "image", "", "base image of repositories that name none (default "+defaultImage+")")
	fs.StringVar(&s.network, "network", "", "bridge: let tasks ask for a bridged network, bypassing the egress proxy (policy network_bridge)")
	fs.StringVar(&s.verify, "verify", "finish", "when agents run the tests: finish, after_write or never")
	fs.StringVar(&s.otlp, "otlp-endpoint", "", "OTLP/HTTP base URL for traces, spans go to its /v1/traces (default $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, or $OTEL_EXPORTER_OTLP_ENDPOINT; with none of them, no tracing)")
	fs.StringVar(&s.workerID, "worker-id", "", "name of this worker in task states (default host-pid)")
	s.github.register(fs, env)
	fs.DurationVar(&s.ackWait, "ack-wait", dispatcher.DefaultAckWait, "how long a task whose worker went silent waits before another worker gets it")
	fs.StringVar(&s.minFree, "min-free-disk", defaultMinFreeDisk, "free space the data dir's disk needs for this process to take tasks (0: not checked); below it, as with its Docker engine down or its image missing, it is unready and hands tasks over, and serve's /readyz fails while its embedded NATS store is below it")
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
	if _, err := parseSize(s.minFree); err != nil {
		return fmt.Errorf("--min-free-disk: %w", err)
	}
	switch agent.VerifyPolicy(s.verify) {
	case agent.VerifyOnFinish, agent.VerifyAfterWrite, agent.VerifyNever:
	default:
		return fmt.Errorf("--verify %q is not one of finish, after_write, never", s.verify)
	}
	return nil
}

// workerOptions are the worker's options; loopback says whether the API
// tasks come through listens on loopback only (the built-in policy then
// lets tasks name paths on this disk and scripted models).
func (s *serviceFlags) workerOptions(gh *githubConn, loopback bool) workerOptions {
	o := workerOptions{common: s.common, image: s.image, verify: agent.VerifyPolicy(s.verify),
		network: s.network, warm: s.warm, deployment: s.common.deployment, credentials: gh.credentials(),
		checkMounts: true, loopback: loopback}
	o.minFreeDisk, _ = parseSize(s.minFree) // checked by check
	o.link = s.link
	o.flagSecrets = []string{s.github.token}
	if gh != nil {
		o.caBundle = gh.ca
	}
	return o
}

// workerOptions are the service's worker options, with serve's own
// secret flags among the values the worker redacts.
func (f *serveFlags) workerOptions(gh *githubConn, loopback bool) workerOptions {
	o := f.service.workerOptions(gh, loopback)
	o.flagSecrets = append(o.flagSecrets, f.token, f.githubSecret)
	return o
}

// serveFlags are the flags of `wrench serve`.
type serveFlags struct {
	service    serviceFlags
	httpAddr   string
	natsListen string
	// natsCert and natsKey are the embedded NATS's TLS certificate.
	natsCert, natsKey string
	nats              natsFlags
	token             string
	maxBody           int64
	// githubSecret enables the GitHub webhook.
	githubSecret string
}

// embeddedNATS configures the embedded NATS. Listening for workers, it
// admits only the worker user whose seed is DATA/nats/worker.nk (made on
// first use), over TLS beyond loopback (a certificate made under
// DATA/nats/tls unless --nats-tls-cert and --nats-tls-key name one);
// signIn is the worker flags that go with it.
func (f *serveFlags) embeddedNATS(dataDir string) (cfg natsserver.Config, signIn string, err error) {
	cfg = natsserver.Config{DataDir: dataDir, Listen: f.natsListen}
	if f.natsListen == "" {
		return cfg, "", nil
	}
	seed := filepath.Join(dataDir, "nats", "worker.nk")
	pub, err := natsserver.EnsureUserSeed(seed)
	if err != nil {
		return cfg, "", err
	}
	cfg.NKeys = []string{pub}
	signIn = "--nats-nkey " + seed
	host, _, _ := net.SplitHostPort(f.natsListen)
	switch {
	case f.natsCert != "":
		cert, err := tls.LoadX509KeyPair(f.natsCert, f.natsKey)
		if err != nil {
			return cfg, "", fmt.Errorf("--nats-tls-cert/--nats-tls-key: %w", err)
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	case !isLoopbackHost(host):
		tlsCfg, ca, err := natsserver.EnsureCert(filepath.Join(dataDir, "nats", "tls"), []string{host})
		if err != nil {
			return cfg, "", err
		}
		cfg.TLS = tlsCfg
		signIn += " --nats-ca " + ca
	}
	return cfg, signIn, nil
}

// workerURL is the URL workers dial: tls:// when the server requires TLS.
func workerURL(clientURL string, tlsOn bool) string {
	if tlsOn {
		return strings.Replace(clientURL, "nats://", "tls://", 1)
	}
	return clientURL
}

// listensOnLoopback reports whether ln accepts connections from this
// machine only.
func listensOnLoopback(ln net.Listener) bool {
	host, _, err := net.SplitHostPort(ln.Addr().String())
	return err == nil && isLoopbackHost(host)
}

// isLoopbackHost reports whether a listen host reaches only this machine.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
	if (f.natsCert == "") != (f.natsKey == "") || (f.natsCert != "" && f.natsListen == "") {
		return errors.New("--nats-tls-cert and --nats-tls-key go together, with --nats-listen")
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
	fs.StringVar(&f.natsListen, "nats-listen", "", "also serve the embedded NATS on this `HOST:PORT` so wrench worker can join (default: in-process only)")
	fs.StringVar(&f.natsCert, "nats-tls-cert", "", "TLS certificate (PEM) of the embedded NATS (with --nats-listen; default beyond loopback: one made under the data dir)")
	fs.StringVar(&f.natsKey, "nats-tls-key", "", "TLS key (PEM) of --nats-tls-cert")
	f.nats.register(fs, "join this external NATS (URLs comma-separated for a cluster) instead of embedding one")
	f.nats.layout.register(fs)
	fs.StringVar(&f.token, "token", env.getenv("WRENCH_API_TOKEN"), "bearer token the API requires (default $WRENCH_API_TOKEN; required off loopback)")
	fs.Int64Var(&f.maxBody, "max-body", api.DefaultMaxBody, "largest accepted request body, in bytes")
	fs.StringVar(&f.githubSecret, "github-webhook-secret", env.getenv("WRENCH_GITHUB_WEBHOOK_SECRET"), "serve POST /webhooks/github, verifying deliveries with this secret (default $WRENCH_GITHUB_WEBHOOK_SECRET; none: no webhook)")
	pos, code, ok := parseCommand(env, fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(env.stderr, "wrench serve: unexpected argument %q\n", pos[0])
		return exitBadInput
	}
	if err := f.check(); err != nil {
		fmt.Fprintf(env.stderr, "wrench serve: %v\n", err)
		return exitBadInput
	}
	dataDir, err := f.service.common.resolvedDataDir()
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench serve: %v\n", err)
		return exitBadInput
	}
	unlock, err := lockDataDir(dataDir)
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench serve: %v\n", err)
		if errors.Is(err, errDataDirLocked) {
			return exitBadInput
		}
		return exitInfra
	}
	defer unlock()
	ln, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench serve: listen on %s: %v\n", f.httpAddr, err)
		return exitInfra
	}
	defer ln.Close()
	// With no slots this process runs no task: it needs no worker, so no
	// Docker engine and no workspaces.
	gh, err := f.service.github.open(f.service.common.logger(env))
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench serve: %v\n", err)
		return exitBadInput
	}
	if err := gh.usePolicy(f.workerOptions(gh, listensOnLoopback(ln))); err != nil {
		fmt.Fprintf(env.stderr, "wrench serve: %v\n", err)
		return exitBadInput
	}
	f.service.gh = gh
	var runner dispatcher.Runner
	if f.service.slots > 0 {
		w, cleanup, err := newWorker(ctx, env, f.workerOptions(gh, listensOnLoopback(ln)))
		if err != nil {
			fmt.Fprintf(env.stderr, "wrench serve: %v\n", err)
			return exitCodeFor(err)
		}
		defer cleanup()
		runner = w
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

	q, err := f.openQueue(ctx, env, log)
	if err != nil {
		return fail(err)
	}
	defer q.close()
	conn, emb := q.conn, q.emb
	reportDurability(ctx, env, "wrench serve", log, conn, q.known, splitList(f.nats.monitors), tel.metrics)
	f.service.link.connect(ctx, conn, tel.metrics, log)
	defer startSweeper(ctx, conn.Submissions(), tel.metrics, log)()

	d, err := f.dispatcher(ctx, env, tel, conn, runner, log)
	if err != nil {
		return fail(err)
	}
	submitter := countingSubmitter{Submissions: conn.Submissions(), m: tel.metrics}
	// The API and the webhook admit only what the policy allows; its
	// built-in form allows paths on this disk and scripted models only
	// while the API listens on loopback.
	popts := f.service.workerOptions(f.service.gh, listensOnLoopback(ln))
	pol, err := loadPolicy(popts)
	if err != nil {
		return fail(err)
	}
	// Budgets follow the policy as last loaded: SIGHUP loads it again, and
	// the sweeper resumes paused tasks whose budget has room.
	f.service.link.setPolicy(pol, func() (*policy.Policy, error) { return loadPolicy(popts) })
	defer watchPolicyReload(ctx, f.service.link, log)()
	defer startBudgetSweeper(ctx, conn.Submissions(), f.service.link, tel.metrics, log, budgetSweepInterval, time.Now)()
	tenantToken, err := tenantTokens(pol, env.getenv)
	if err != nil {
		return fail(err)
	}
	srv, err := api.NewServer(api.Config{
		Admit:       pol.Admit,
		TenantToken: tenantToken,
		Tenant: func(tokenTenant string, t task.Task) string {
			return pol.Tenant(policy.Who{TokenTenant: tokenTenant, Repo: t.Repo.URL})
		},
		Submitter:      apiSubmitter{submitter},
		States:         conn.States(),
		Events:         conn.Events(),
		Artifacts:      conn.Artifacts(),
		Token:          f.token,
		MaxBody:        f.maxBody,
		Logger:         log.With("component", "api"),
		Metrics:        telemetry.Handler(tel.registry),
		Ready:          storeReady(conn, emb),
		TracerProvider: tel.tp,
		Propagator:     telemetry.Propagator(),
		ObserveRequest: tel.metrics.HTTPRequest,
	})
	if err != nil {
		return fail(err)
	}
	if err := f.service.gh.mountWebhook(srv, f.service.github, f.githubSecret, submitter, pol, env, f.service.common); err != nil {
		return fail(err)
	}
	if d != nil {
		// The API's /readyz says whether it accepts tasks (they wait in
		// the queue while this process's engine is down); this one
		// whether its own dispatcher takes them.
		ready := storeReady(conn, emb)
		srv.Handle("GET /readyz/worker", readyHandler(func(ctx context.Context) error { return errors.Join(ready(ctx), d.Ready()) }))
	}
	slots := fmt.Sprintf("%d slots", f.service.slots)
	if d == nil {
		slots = "API only, no slots"
	}
	if d != nil {
		warnNoModelKey(env, "wrench serve")
	}
	fmt.Fprintf(env.stderr, "wrench serve: API on http://%s (%s, %s)\n", ln.Addr(), q.where, slots)
	log.Info("serving", "http", ln.Addr().String(), "nats", conn.URL(), "slots", f.service.slots)
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
	wg.Go(func() { reportLag(lagCtx, conn.Work(), m, log) })
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

// countingSubmitter counts accepted submissions in the metrics.
type countingSubmitter struct {
	*queue.Submissions
	m *telemetry.Metrics
}

func (b countingSubmitter) Submit(ctx context.Context, t task.Task) (task.Status, bool, error) {
	// What only the agent knows is checked here, where the API and the
	// webhook hand tasks in: a bad one is rejected (400) naming its field,
	// never queued to fail on a worker. The task's own rules (task.Validate)
	// are checked once, by Submissions.Submit.
	if err := agent.CheckTask(&t); err != nil {
		return task.Status{}, false, err
	}
	st, dup, err := b.Submissions.Submit(ctx, t)
	if err == nil && !dup {
		b.m.TaskSubmitted(t.Source.Kind)
	}
	return st, dup, err
}

// Resume queues paused task id again by hand, counted in
// wrench_tasks_resumed_total{how="manual"}.
func (b countingSubmitter) Resume(ctx context.Context, id string) (task.Status, error) {
	st, err := b.Submissions.Resume(ctx, id)
	if err == nil {
		b.m.TasksResumed(telemetry.ResumedByHand, 1)
	}
	return st, err
}

// Cancel cancels task id; a queued task it cancels is counted as finished
// (wrench_tasks_finished_total{status="cancelled"}) here, since no worker
// ever sees it.
func (b countingSubmitter) Cancel(ctx context.Context, id string) (task.Status, error) {
	st, cancelledQueued, err := b.Submissions.CancelReport(ctx, id)
	if err == nil && cancelledQueued && st.Result != nil {
		b.m.TaskFinished(*st.Result, 0)
	}
	return st, err
}

// tenantTokens reads the tenants' API tokens the policy names; nil when it
// names none (the API then knows only --token).
func tenantTokens(pol *policy.Policy, getenv func(string) string) (func(string) (string, bool), error) {
	toks, err := pol.TenantTokens(getenv)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if toks.Len() == 0 {
		return nil, nil
	}
	return toks.Lookup, nil
}

// serveQueue is the queue serve runs on: an external NATS (--nats), or the
// server it embeds with its data in the data directory.
type serveQueue struct {
	conn  *queue.Conn
	emb   *natsserver.Server // the embedded server, nil with --nats
	where string             // where the queue is, for the start line
	known queue.Sync         // the server's sync setting, when known without asking
}

// openQueue connects to --nats, or starts the embedded server and
// connects to it, telling workers where to find it.
func (f *serveFlags) openQueue(ctx context.Context, env *cliEnv, log *slog.Logger) (*serveQueue, error) {
	q := &serveQueue{known: queue.SyncUnknown}
	if f.nats.url != "" {
		conn, err := f.nats.connect(ctx, log, true)
		if err != nil {
			return nil, err
		}
		q.conn, q.where = conn, "queue on "+conn.URL()
		return q, nil
	}
	dataDir, err := f.service.common.resolvedDataDir()
	if err != nil {
		return nil, err
	}
	ncfg, signIn, err := f.embeddedNATS(dataDir)
	if err != nil {
		return nil, err
	}
	ncfg.Logger = log
	ncfg.MinFreeDisk, _ = parseSize(f.service.minFree) // checked by check
	if q.emb, err = natsserver.Start(ctx, ncfg); err != nil {
		return nil, err
	}
	qcfg := f.nats.layout.config(log, true)
	qcfg.ConnectOptions = []nats.Option{q.emb.ConnectOption()}
	if q.conn, err = queue.Connect(ctx, qcfg); err != nil {
		q.emb.Shutdown()
		return nil, err
	}
	q.where = "data in " + dataDir
	if q.emb.SyncAlways() {
		q.known = queue.SyncAlways
	}
	if q.emb.ClientURL() != "" {
		fmt.Fprintf(env.stderr, "wrench serve: NATS for workers at %s\n", workerURL(q.emb.ClientURL(), ncfg.TLS != nil))
		fmt.Fprintf(env.stderr, "wrench serve: workers sign in with %s\n", signIn)
	}
	return q, nil
}

// close closes the connection, then stops the embedded server.
func (q *serveQueue) close() {
	q.conn.Close()
	if q.emb != nil {
		q.emb.Shutdown()
	}
}

// dispatcher is serve's own dispatcher when it runs tasks (runner not
// nil). With --slots 0 it is nil, and the consumers the workers share (and
// an autoscaler reads) are made now, with the settings a worker's
// dispatcher gives them: no worker may have started yet.
func (f *serveFlags) dispatcher(ctx context.Context, env *cliEnv, tel *serviceTelemetry, conn *queue.Conn, runner dispatcher.Runner, log *slog.Logger) (*dispatcher.Dispatcher, error) {
	dcfg, err := tel.dispatcherConfig(f.service, log)
	if err != nil {
		return nil, err
	}
	if runner == nil {
		return nil, dispatcher.OpenQueue(ctx, dispatcher.NATS(conn).Work, dcfg)
	}
	if dcfg.Finalizer, err = f.service.gh.finalizer(conn, dcfg.WorkerID, f.service.ackWait, f.service.common, env); err != nil {
		return nil, err
	}
	return dispatcher.New(dispatcher.NATS(conn), runner, dcfg)
}
