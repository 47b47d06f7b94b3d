package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/queue/natsserver"
)

// freePorts returns n distinct free loopback ports.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// rawServer runs a nats-server with opts on loopback (a random port unless
// opts names one) for the test, without Wrench's configuration, and waits
// until it takes connections.
func rawServer(t *testing.T, opts server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.NoSigs, opts.NoLog = "127.0.0.1", true, true
	if opts.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	srv, err := server.NewServer(&opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(waitLimit) {
		t.Fatal("nats-server not ready")
	}
	return srv
}

// clusterNodes are the configs of a three-node cluster on loopback.
func clusterNodes(t *testing.T) []natsserver.Config {
	t.Helper()
	ports := freePorts(t, 3)
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	var nodes []natsserver.Config
	for i, p := range ports {
		nodes = append(nodes, natsserver.Config{
			Name:   fmt.Sprintf("n%d", i+1),
			Listen: "127.0.0.1:0",
			Cluster: &natsserver.Cluster{Name: "wrench-test",
				Listen: fmt.Sprintf("127.0.0.1:%d", p), Routes: routes},
		})
	}
	return nodes
}

// A worker started while the cluster has no JetStream leader waits for
// one, saying what it waits for, instead of exiting.
func TestConnectWaitsForClusterLeader(t *testing.T) {
	nodes := clusterNodes(t)
	first := natstest.Start(t, nodes[0]) // alone: no meta leader
	warns := newWarnings()
	ctx, cancel := context.WithTimeout(context.Background(), 4*waitLimit)
	defer cancel()
	type result struct {
		c   *queue.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := queue.Connect(ctx, queue.Config{URL: first.ClientURL(), Replicas: 3,
			Logger: slog.New(warns), BindRetry: queue.Backoff{Min: 50e6}})
		done <- result{c, err}
	}()
	select {
	case <-warns.first:
	case r := <-done:
		t.Fatalf("Connect to a cluster without a leader returned without waiting for one: %v", r.err)
	}
	for _, n := range nodes[1:] {
		natstest.Start(t, n)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("Connect once the cluster has a leader: %v (warnings: %q)", r.err, warns.all())
	}
	defer r.c.Close()
	if !strings.Contains(warns.all()[0], "waiting_for=") {
		t.Errorf("warning %q does not say what it waits for", warns.all()[0])
	}
	if _, _, err := r.c.Submissions().Submit(ctx, newTask("t-after-election")); err != nil {
		t.Fatalf("submit after the election: %v", err)
	}
}

// A worker started before its server's JetStream is up waits for it.
func TestConnectWaitsForJetStream(t *testing.T) {
	// A server without JetStream: requests to its API find no responders.
	srv := rawServer(t, server.Options{})
	warns := newWarnings()
	done := make(chan error, 1)
	go func() {
		c, err := queue.Connect(context.Background(), queue.Config{URL: srv.ClientURL(),
			Logger: slog.New(warns), BindRetry: queue.Backoff{Min: 50e6}})
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	select {
	case <-warns.first:
	case err := <-done:
		t.Fatalf("Connect without JetStream returned without waiting for it: %v", err)
	}
	if err := srv.EnableJetStream(&server.JetStreamConfig{StoreDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Connect once JetStream is up: %v (warnings: %q)", err, warns.all())
	}
}

// A worker started before any NATS server runs waits for one, saying so
// without the URL's password, and joins it once it is up; when its context
// ends first, the error says what it gave up on.
func TestConnectWaitsForServer(t *testing.T) {
	port := freePorts(t, 1)[0]
	url := fmt.Sprintf("nats://w:hunter2secret@127.0.0.1:%d", port)
	t.Run("server comes", func(t *testing.T) {
		warns := newWarnings()
		done := make(chan error, 1)
		go func() {
			c, err := queue.Connect(context.Background(), queue.Config{URL: url,
				Logger: slog.New(warns), BindRetry: queue.Backoff{Min: 50e6}})
			if err == nil {
				c.Close()
			}
			done <- err
		}()
		select {
		case <-warns.first:
		case err := <-done:
			t.Fatalf("Connect with no server returned without waiting for one: %v", err)
		}
		rawServer(t, server.Options{Port: port, JetStream: true, StoreDir: t.TempDir(), Username: "w", Password: "hunter2secret"})
		if err := <-done; err != nil {
			t.Fatalf("Connect once the server is up: %v (warnings: %q)", err, warns.all())
		}
		w := warns.all()[0]
		if !strings.Contains(w, "nats not reachable") || !strings.Contains(w, fmt.Sprintf("127.0.0.1:%d", port)) {
			t.Errorf("warning %q does not say which server it waits for", w)
		}
		if strings.Contains(strings.Join(warns.all(), "\n"), "hunter2secret") {
			t.Errorf("a warning shows the URL's password: %q", warns.all())
		}
	})
	t.Run("gives up", func(t *testing.T) {
		free := freePorts(t, 1)[0]
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := queue.Connect(ctx, queue.Config{URL: fmt.Sprintf("nats://s3cr3ttoken@127.0.0.1:%d", free),
			BindRetry: queue.Backoff{Min: 50e6}})
		if err == nil || !strings.Contains(err.Error(), "gave up waiting for a server") {
			t.Fatalf("Connect whose context ended: %v, want it to say it gave up waiting", err)
		}
		if strings.Contains(err.Error(), "s3cr3ttoken") {
			t.Errorf("error %q shows the URL's token", err)
		}
	})
}

// An error that waiting does not mend is returned at once, unlogged.
func TestConnectPermanentErrorAtOnce(t *testing.T) {
	t.Run("config", func(t *testing.T) {
		s := startNATS(t, "")
		// One server cannot hold three replicas.
		permanent(t, queue.Config{ConnectOptions: []nats.Option{s.ConnectOption()}, Replicas: 3, ApplyLayout: true})
	})
	t.Run("permission", func(t *testing.T) {
		srv := rawServer(t, server.Options{JetStream: true, StoreDir: t.TempDir(),
			Users: []*server.User{{Username: "w", Password: "w",
				Permissions: &server.Permissions{Publish: &server.SubjectPermission{Deny: []string{"$JS.API.>"}}}}}})
		err := permanent(t, queue.Config{URL: srv.ClientURL(), ConnectOptions: []nats.Option{nats.UserInfo("w", "w"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}})
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Fatalf("error %q does not name the refused permission", err)
		}
	})
	t.Run("credential", func(t *testing.T) {
		srv := rawServer(t, server.Options{JetStream: true, StoreDir: t.TempDir(), Username: "w", Password: "right"})
		err := permanent(t, queue.Config{URL: srv.ClientURL(), ConnectOptions: []nats.Option{nats.UserInfo("w", "wrong")}})
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("error %q does not say the credential was refused", err)
		}
	})
}

// permanent checks that Connect with cfg fails without retrying, and
// returns its error.
func permanent(t *testing.T, cfg queue.Config) error {
	t.Helper()
	warns := newWarnings()
	cfg.Logger = slog.New(warns)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit) // bounds a wrong retry
	defer cancel()
	c, err := queue.Connect(ctx, cfg)
	if err == nil {
		c.Close()
		t.Fatal("Connect succeeded")
	}
	if ctx.Err() != nil || len(warns.all()) != 0 {
		t.Fatalf("a permanent error was retried: %v; warnings %q", err, warns.all())
	}
	return err
}
