package main

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/wrenchworks/wrench/queue"
)

func TestNATSServerRejectsBadFlags(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--store-dir is required"},
		{[]string{"--store-dir", store, "--listen", ""}, "--listen is required"},
		{[]string{"--store-dir", store, "--sync", "sometimes"}, `--sync "sometimes"`},
		{[]string{"--store-dir", store, "--sync", "-1s"}, `--sync "-1s"`},
		{[]string{"--store-dir", store, "--cluster-listen", "127.0.0.1:0"}, "needs --name"},
		{[]string{"--store-dir", store, "--routes", "nats://127.0.0.1:1"}, "--routes needs --cluster-listen"},
		{[]string{"--store-dir", store, "--tls-cert", "x.pem"}, "go together"},
		{[]string{"--store-dir", store, "--name", "a", "--listen", "127.0.0.1:0", "--cluster-listen", "0.0.0.0:0"}, "not authenticated"},
		{[]string{"--store-dir", store, "--name", "a", "--listen", "127.0.0.1:0", "--cluster-listen", "127.0.0.1:0", "--routes", "http://x:1"}, "not a nats://host:port URL"},
		{[]string{"--store-dir", store, "--listen", "0.0.0.0:0"}, "needs user nkeys and TLS"},
	} {
		_, stderr, code := runDispatch(noEnv, append([]string{"nats-server"}, tc.args...)...)
		if code == exitOK || !strings.Contains(stderr, tc.want) {
			t.Errorf("nats-server %q: exit %d, stderr %q; want failure saying %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestNATSServerCluster runs three `wrench nats-server` processes as a
// cluster: the queue lays out R3 streams over the comma-separated URLs
// (scaling up the R1 streams an earlier client made), a
// node stopped with SIGTERM exits 0, and a second process on a node's store
// dir is refused, and the other two still take a submission; doctor
// reports the replicas current, then n3 behind.
func TestNATSServerCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startNATSCluster(t, ctx, 3)
	// A worker first lays the streams out with one replica; serve's
	// layout scales them up to three.
	first, err := queue.Connect(ctx, queue.Config{URL: c.urls()})
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	conn, err := queue.Connect(ctx, queue.Config{URL: c.urls(), Replicas: 3, ApplyLayout: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	d, err := conn.Durability(ctx, queue.SyncUnknown, strings.Split(c.monitors(), ","))
	if err != nil {
		t.Fatal(err)
	}
	if d.Replicas != 3 || d.Sync != queue.SyncAlways {
		t.Fatalf("durability %+v, want 3 replicas synced always", d)
	}
	nc, err := nats.Connect(c.urls())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, name := range queue.QueueStreams {
		// waitCurrent: every one of the stream's 3 replicas is placed and current.
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		err := c.waitCurrent(wctx, nc, name)
		wcancel()
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	doctor := func() (bool, string) {
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		ok := doctorNATS(ctx, &out, natsFlags{url: c.urls(), monitors: c.monitors()})
		return ok, out.String()
	}
	if ok, out := doctor(); !ok || !strings.Contains(out, "cluster      ok    wrench-test: all 5 streams have 3 of 3 replicas current") {
		t.Errorf("doctor on a healthy cluster: ok=%v\n%s", ok, out)
	}
	n3 := c.node("n3")
	second := startProc(t, "n3-again", n3.args...)
	<-second.done
	if !strings.Contains(second.out.String(), "is owned by wrench pid") {
		t.Errorf("second process on n3's store dir: %v\n%s", second.err, second.out.String())
	}
	if err := n3.proc.stop(t); err != nil {
		t.Fatalf("n3 after SIGTERM: %v", err)
	}
	if !strings.Contains(n3.proc.out.String(), "nats-server shutting down") {
		t.Errorf("n3 did not log its shutdown:\n%s", tail(n3.proc.out.String(), 2048))
	}
	// doctor sees n3 behind (once the leaders notice), and still passes.
	for {
		ok, out := doctor()
		if ok && strings.Contains(out, "behind: n3") && strings.Contains(out, "cluster      WARN") {
			t.Logf("doctor with n3 down:\n%s", out)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("doctor with n3 down: ok=%v\n%s", ok, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Two of three nodes still take a submission.
	subCtx, subCancel := context.WithTimeout(ctx, 20*time.Second)
	defer subCancel()
	if _, _, err := conn.Submissions().Submit(subCtx, helloTask("after-n3", "/nonexistent", "x.yaml")); err != nil {
		t.Fatalf("submit with n3 down: %v", err)
	}
}

// A node started with --user-nkey admits only that user: a client without
// the seed is refused, one signing in with it (wrench worker --nats-nkey)
// gets the queue.
func TestNATSServerUserNKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seed := filepath.Join(t.TempDir(), "user.nk")
	c := startNATSCluster(t, ctx, 1, "--user-nkey", seed)
	if _, err := queue.Connect(ctx, queue.Config{URL: c.urls()}); err == nil {
		t.Fatal("a client without the user's seed connected")
	}
	n := natsFlags{url: c.urls(), nkey: seed}
	conn, err := n.connect(ctx, slog.New(slog.DiscardHandler), true)
	if err != nil {
		t.Fatalf("connect with --nats-nkey %s: %v", seed, err)
	}
	conn.Close()
}
