package natsserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/wrenchworks/wrench/internal/disktest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/queue/natsserver"
)

// TestStoreRecoversAfterDiskFull fills the embedded server's disk (a real
// tmpfs) while the queue stores an artifact: the artifact store fails the
// write and, as nats-server does, keeps failing after the space is back.
// The server's Health fails while the disk is low and while the store has
// lost its writes, and once the disk has room the server restarts
// JetStream by itself: Health passes, the store probe passes, the same
// connection stores the artifact and reads the earlier ones.
func TestStoreRecoversAfterDiskFull(t *testing.T) {
	dir := disktest.Mount(t, "96m")
	s, err := natsserver.Start(context.Background(), natsserver.Config{DataDir: dir,
		MinFreeDisk: 4 << 20, GuardInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	c, err := queue.Connect(context.Background(), queue.Config{ConnectOptions: []nats.Option{s.ConnectOption()},
		Retention: queue.Retention{StateMaxBytes: 8 << 20, ArtifactsMaxBytes: 32 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	put := func(id string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := c.Artifacts().Put(ctx, id, map[string][]byte{"patch.diff": make([]byte, 256<<10)})
		return err
	}
	if err := put("t-before"); err != nil {
		t.Fatal(err)
	}
	if err := s.Health(); err != nil {
		t.Fatalf("health before: %v", err)
	}

	free := disktest.Fill(t, dir)
	if err := put("t-full"); err == nil {
		t.Fatal("an artifact was stored on a full disk")
	}
	waitHealth(t, s, func(err error) bool { return err != nil && strings.Contains(err.Error(), "below the 4 MiB minimum") })
	if err := s.Health(); !strings.Contains(err.Error(), "failed a write") {
		t.Errorf("health on a full disk does not name the failed write: %v", err)
	}

	free()
	waitHealth(t, s, func(err error) bool { return err == nil })
	if err := c.StoreReady(context.Background()); err != nil {
		t.Fatalf("store probe after recovery: %v", err)
	}
	if err := put("t-after"); err != nil {
		t.Fatalf("the artifact store still takes no writes after the disk has room: %v", err)
	}
	for _, id := range []string{"t-before", "t-after"} {
		if b, err := c.Artifacts().Get(context.Background(), id, "patch.diff"); err != nil || len(b) != 256<<10 {
			t.Errorf("artifact of %s after recovery: %d bytes, %v", id, len(b), err)
		}
	}
}

// waitHealth waits until ok(s.Health()).
func waitHealth(t *testing.T, s *natsserver.Server, ok func(error) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok(s.Health()) {
		if time.Now().After(deadline) {
			t.Fatalf("health stayed %v", s.Health())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Shutdown may be called twice (a test's cleanup after it stopped the
// server itself, a deferred stop after an early one).
func TestShutdownTwice(t *testing.T) {
	s, err := natsserver.Start(context.Background(), natsserver.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.Shutdown()
}
