package natsserver_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/wrenchworks/wrench/queue/natsserver"
)

func start(t *testing.T, cfg natsserver.Config) *natsserver.Server {
	t.Helper()
	cfg.DataDir = t.TempDir()
	s, err := natsserver.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func dial(url string, opts ...nats.Option) error {
	nc, err := nats.Connect(url, append(opts, nats.Timeout(5*time.Second), nats.NoReconnect())...)
	if err == nil {
		err = nc.Flush()
		nc.Close()
	}
	return err
}

// A stranger reaching the listener cannot connect (the hostile review
// published a task and read every task's events with a raw TCP client);
// a worker with the seed file can, and so can the server's own in-process
// clients.
func TestHostileClient_NATSNeedsCredentials(t *testing.T) {
	seed := filepath.Join(t.TempDir(), "worker.nk")
	pub, err := natsserver.EnsureUserSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := natsserver.EnsureUserSeed(seed); err != nil || again != pub {
		t.Fatalf("a second call made another key: %v %v", again, err)
	}
	s := start(t, natsserver.Config{Listen: "127.0.0.1:0", NKeys: []string{pub}})
	if err := dial(s.ClientURL()); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Errorf("unauthenticated client: %v", err)
	}
	opt, err := nats.NkeyOptionFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(s.ClientURL(), opt); err != nil {
		t.Errorf("worker with the seed: %v", err)
	}
	if err := dial("", s.ConnectOption()); err != nil {
		t.Errorf("in-process: %v", err)
	}
}

// Beyond loopback the listener needs users and TLS; with both, a worker
// that trusts the certificate signs in, and a plain-text client does not.
func TestNATSBeyondLoopbackNeedsTLS(t *testing.T) {
	seed := filepath.Join(t.TempDir(), "worker.nk")
	pub, err := natsserver.EnsureUserSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []natsserver.Config{
		{DataDir: t.TempDir(), Listen: "0.0.0.0:0"},
		{DataDir: t.TempDir(), Listen: "0.0.0.0:0", NKeys: []string{pub}},
	} {
		if s, err := natsserver.Start(context.Background(), cfg); !errors.Is(err, natsserver.ErrInsecureListen) {
			if s != nil {
				s.Shutdown()
			}
			t.Errorf("Start(%s, %d users, tls %v) = %v, want ErrInsecureListen", cfg.Listen, len(cfg.NKeys), cfg.TLS != nil, err)
		}
	}
	tlsCfg, ca, err := natsserver.EnsureCert(t.TempDir(), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, natsserver.Config{Listen: "0.0.0.0:0", NKeys: []string{pub}, TLS: tlsCfg})
	url := strings.Replace(s.ClientURL(), "0.0.0.0", "127.0.0.1", 1)
	opt, _ := nats.NkeyOptionFromSeed(seed)
	if err := dial(url, opt, nats.RootCAs(ca)); err != nil {
		t.Errorf("worker with seed and CA: %v", err)
	}
	if err := dial(url, opt); err == nil {
		t.Error("a client that does not trust the certificate connected")
	}
	if err := dial("", s.ConnectOption()); err != nil {
		t.Errorf("in-process: %v", err)
	}
}
