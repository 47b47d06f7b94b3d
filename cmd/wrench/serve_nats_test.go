package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/task"
)

// startAuthNATS runs a JetStream NATS server that admits only users with
// credentials (operator mode: an operator, one account with JetStream, one
// user), as a production cluster would, and returns its URL and a
// credentials file for that user.
func startAuthNATS(t *testing.T) (url, creds string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	okp, err := nkeys.CreateOperator()
	must(err)
	opub, _ := okp.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	sysKP, err := nkeys.CreateAccount()
	must(err)
	sysPub, _ := sysKP.PublicKey()
	oc.SystemAccount = sysPub
	ojwt, err := oc.Encode(okp)
	must(err)
	if oc, err = jwt.DecodeOperatorClaims(ojwt); err != nil {
		t.Fatal(err)
	}
	sysJWT, err := jwt.NewAccountClaims(sysPub).Encode(okp)
	must(err)

	akp, err := nkeys.CreateAccount()
	must(err)
	apub, _ := akp.PublicKey()
	ac := jwt.NewAccountClaims(apub)
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	ajwt, err := ac.Encode(okp)
	must(err)

	ukp, err := nkeys.CreateUser()
	must(err)
	upub, _ := ukp.PublicKey()
	ujwt, err := jwt.NewUserClaims(upub).Encode(akp)
	must(err)
	seed, _ := ukp.Seed()
	cb, err := jwt.FormatUserConfig(ujwt, seed)
	must(err)
	creds = filepath.Join(t.TempDir(), "user.creds")
	must(os.WriteFile(creds, cb, 0o600))

	resolver := &server.MemAccResolver{}
	must(resolver.Store(sysPub, sysJWT))
	must(resolver.Store(apub, ajwt))
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		TrustedOperators: []*jwt.OperatorClaims{oc}, AccountResolver: resolver, SystemAccount: sysPub,
		NoSigs: true, NoLog: true,
	})
	must(err)
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv.ClientURL(), creds
}

// TestServeJoinsExternalNATS runs the built binary as the scaled chart's API
// does: `serve --nats URL --nats-creds FILE --slots 0` on a NATS that
// requires credentials. It serves the API without a Docker engine (it
// never builds a worker: no workspaces directory, no engine warning), its
// tasks wait in that NATS, /metrics shows the queue, and a `wrench worker`
// joining the same NATS runs them.
func TestServeJoinsExternalNATS(t *testing.T) {
	url, creds := startAuthNATS(t)

	// Without the credentials the server refuses the connection.
	if code, _, errOut := wrench(t, nil, "serve", "--nats", url, "--slots", "0", "--http", "127.0.0.1:0"); code != exitInfra ||
		!strings.Contains(strings.ToLower(errOut), "authorization") {
		t.Fatalf("serve without credentials: exit %d: %s", code, errOut)
	}

	dataDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, wrenchBin, "serve", "--nats", url, "--nats-creds", creds, "--slots", "0",
		"--http", "127.0.0.1:0", "--data-dir", dataDir, "--log-level", "info")
	// An engine that does not exist: building a worker would warn about it.
	cmd.Env = append(os.Environ(), "DOCKER_HOST=unix:///nonexistent/docker.sock")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	lines := make(chan string, 1)
	logs := &syncBuffer{}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.Write([]byte(sc.Text() + "\n"))
			if u, ok := strings.CutPrefix(sc.Text(), "wrench serve: API on "); ok {
				lines <- u
			}
		}
		done <- cmd.Wait()
	}()
	var banner string
	select {
	case banner = <-lines:
	case err := <-done:
		t.Fatalf("serve exited: %v\n%s", err, logs.String())
	case <-ctx.Done():
		t.Fatal("serve did not start")
	}
	if !strings.Contains(banner, "API only") {
		t.Errorf("banner %q does not say the process runs no tasks", banner)
	}
	base, _, _ := strings.Cut(banner, " ")
	srv := &testServer{url: base}

	code, out, errOut := wrench(t, srv, "submit", "--repo", "https://example.com/r.git", "--task", "resolve")
	if code != exitOK {
		t.Fatalf("submit: %d %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	// The queue gauges come from this process although it has no dispatcher.
	waitMetric(t, ctx, base, "wrench_consumer_pending_messages 1")

	wenv := &cliEnv{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &syncBuffer{}, getenv: func(string) string { return "" }}
	wctx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan int, 1)
	go func() {
		workerDone <- runWorker(wctx, wenv, workerFlags{nats: natsFlags{url: url, creds: creds},
			service: serviceFlags{common: commonFlags{logLevel: "error"}, slots: 1, verify: "finish",
				ackWait: 5 * time.Second, workerID: "w-scaled"}}, fakeRunner(nil))
	}()
	if code, _, errOut := wrench(t, srv, "watch", id); code != exitOK {
		t.Fatalf("watch: %d %s", code, errOut)
	}
	st, err := api.NewClient(base, "").Status(ctx, id)
	if err != nil || st.State != task.StateResolved || st.Worker != "w-scaled" {
		t.Errorf("task after the worker ran it: %+v %v", st, err)
	}
	stopWorker()
	<-workerDone

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("serve on SIGTERM: %v\n%s", err, logs.String())
	}
	if _, err := os.Stat(filepath.Join(dataDir, "workspaces")); !os.IsNotExist(err) {
		t.Errorf("an API-only serve made a workspaces directory (%v)", err)
	}
	if strings.Contains(strings.ToLower(logs.String()), "docker") {
		t.Errorf("an API-only serve touched Docker:\n%s", logs.String())
	}
}

// waitMetric waits until the /metrics of base has a line.
func waitMetric(t *testing.T, ctx context.Context, base, line string) {
	t.Helper()
	for {
		resp, err := http.Get(base + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), "\n"+line+"\n") {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("/metrics never showed %q", line)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func TestServeFlagErrors(t *testing.T) {
	creds := filepath.Join(t.TempDir(), "x.creds")
	if err := os.WriteFile(creds, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"nats and nats-listen", []string{"--nats", "nats://127.0.0.1:1", "--nats-listen", "127.0.0.1:0"}, "--nats-listen"},
		{"creds without nats", []string{"--nats-creds", creds}, "--nats-creds, --nats-nkey and --nats-ca need --nats"},
		{"missing creds file", []string{"--nats", "nats://127.0.0.1:1", "--nats-creds", "/no/such.creds"}, "/no/such.creds"},
		{"no slots and nobody to run tasks", []string{"--slots", "0"}, "--slots 0"},
		{"negative slots", []string{"--slots", "-1"}, "--slots"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--http", "127.0.0.1:0", "--data-dir", t.TempDir()}, tc.args...)
			code, _, errOut := wrench(t, nil, args...)
			if code != exitBadInput || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, want %d naming %q: %s", code, exitBadInput, tc.want, errOut)
			}
		})
	}
	if code, _, errOut := wrench(t, nil, "worker", "--slots", "0", "--nats", "nats://127.0.0.1:1"); code != exitBadInput || !strings.Contains(errOut, "--slots") {
		t.Errorf("worker --slots 0: exit %d: %s", code, errOut)
	}
}

// TestServeAPIOnlyMakesWorkersConsumer: with KEDA at zero workers, the only
// wrench process is the API (`serve --nats URL --slots 0`) on a fresh NATS.
// KEDA's nats-jetstream scaler reads the workers consumer from the
// server's monitoring endpoint (/jsz?acc=$G&consumers=true); that consumer
// must exist, and count a submitted task as pending, before any worker
// starts, or KEDA reports "consumer not found" and never scales up. The
// same holds for each tenant the policy names: its consumer exists from the
// start, before any of its tasks.
func TestServeAPIOnlyMakesWorkersConsumer(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), HTTPHost: "127.0.0.1", HTTPPort: server.RANDOM_PORT, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	monitor := "http://" + srv.MonitorAddr().String()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte("tenants: [{name: payments, repositories: [\"https://example.com/pay*\"]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startServeBinary(t, ctx, []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"},
		"serve", "--nats", srv.ClientURL(), "--slots", "0", "--http", "127.0.0.1:0", "--data-dir", t.TempDir(), "--policy", pol)
	if code, _, errOut := wrench(t, &testServer{url: base}, "submit", "--repo", "https://example.com/r.git", "--task", "resolve"); code != exitOK {
		t.Fatalf("submit: %d %s", code, errOut)
	}
	resp, err := http.Get(monitor + "/jsz?acc=$G&consumers=true&config=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var jsz struct {
		Accounts []struct {
			Name    string `json:"name"`
			Streams []struct {
				Name      string `json:"name"`
				Consumers []struct {
					Name       string `json:"name"`
					NumPending int    `json:"num_pending"`
				} `json:"consumer_detail"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&jsz); err != nil {
		t.Fatal(err)
	}
	pending := map[string]int{}
	for _, a := range jsz.Accounts {
		for _, s := range a.Streams {
			for _, c := range s.Consumers {
				if a.Name == "$G" && s.Name == "WRENCH_TASKS" {
					pending[c.Name] = c.NumPending
				}
			}
		}
	}
	if n, ok := pending["wrench-workers"]; !ok || n != 1 {
		t.Errorf("consumer wrench-workers: present %v, %d pending; want the submitted task (consumers %v)", ok, n, pending)
	}
	if n, ok := pending["wrench-workers-payments"]; !ok || n != 0 {
		t.Errorf("consumer wrench-workers-payments of the policy's tenant: present %v, %d pending; want it made at start, empty (consumers %v)", ok, n, pending)
	}
}

// startServeBinary starts the built binary with args and env until the test
// ends, and returns its API's base URL once it serves.
func startServeBinary(t *testing.T, ctx context.Context, env []string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, wrenchBin, args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	lines := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.Write([]byte(sc.Text() + "\n"))
			if u, ok := strings.CutPrefix(sc.Text(), "wrench serve: API on "); ok {
				lines <- u
			}
		}
		done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
	})
	select {
	case banner := <-lines:
		base, _, _ := strings.Cut(banner, " ")
		return base
	case err := <-done:
		t.Fatalf("serve exited: %v\n%s", err, logs.String())
	case <-ctx.Done():
		t.Fatalf("serve did not start:\n%s", logs.String())
	}
	return ""
}
