package queue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/queue/natsserver"
	"github.com/wrenchworks/wrench/task"
)

// bucketLimits reads the age, size and discard policy of a bucket's stream.
func bucketLimits(t *testing.T, js jetstream.JetStream, stream string) (time.Duration, int64, jetstream.DiscardPolicy) {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	sc := s.CachedInfo().Config
	return sc.MaxAge, sc.MaxBytes, sc.Discard
}

func TestRetentionLimits(t *testing.T) {
	hour := time.Hour
	for _, c := range []struct {
		name                       string
		ret                        queue.Retention
		stateAge, artAge           time.Duration
		stateBytes, artifactsBytes int64
	}{
		{"defaults", queue.Retention{}, queue.DefaultStateMaxAge, queue.DefaultArtifactsMaxAge, queue.DefaultStateMaxBytes, queue.DefaultArtifactsMaxBytes},
		{"set", queue.Retention{StateMaxAge: hour, StateMaxBytes: 1 << 20, ArtifactsMaxAge: 2 * hour, ArtifactsMaxBytes: 2 << 20}, hour, 2 * hour, 1 << 20, 2 << 20},
		{"unlimited", queue.Retention{StateMaxAge: -1, StateMaxBytes: -1, ArtifactsMaxAge: -1, ArtifactsMaxBytes: -1}, 0, 0, -1, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startNATS(t, "")
			connect(t, s, func(cfg *queue.Config) { cfg.Retention, cfg.ApplyLayout = c.ret, true })
			js := natstest.JetStream(t, s)
			age, size, discard := bucketLimits(t, js, "KV_"+queue.StateBucket)
			if age != c.stateAge || size != c.stateBytes || discard != jetstream.DiscardOld {
				t.Errorf("state bucket: age %s, bytes %d, %v; want %s, %d, DiscardOld", age, size, discard, c.stateAge, c.stateBytes)
			}
			age, size, discard = bucketLimits(t, js, "OBJ_"+queue.ArtifactsBucket)
			if age != c.artAge || size != c.artifactsBytes || discard != jetstream.DiscardOld {
				t.Errorf("artifact store: age %s, bytes %d, %v; want %s, %d, DiscardOld", age, size, discard, c.artAge, c.artifactsBytes)
			}
		})
	}
}

// Only a connection that owns the layout changes existing streams: a
// worker started with other flags leaves them as serve set them.
func TestApplyLayoutOnlyWhenAsked(t *testing.T) {
	s := startNATS(t, "")
	connect(t, s, func(cfg *queue.Config) {
		cfg.ApplyLayout, cfg.Retention = true, queue.Retention{StateMaxAge: time.Hour}
	})
	connect(t, s, func(cfg *queue.Config) { cfg.Retention = queue.Retention{StateMaxAge: 2 * time.Hour} })
	js := natstest.JetStream(t, s)
	if age, _, _ := bucketLimits(t, js, "KV_"+queue.StateBucket); age != time.Hour {
		t.Fatalf("a connection without ApplyLayout changed the state age to %s", age)
	}
	connect(t, s, func(cfg *queue.Config) {
		cfg.ApplyLayout, cfg.Retention = true, queue.Retention{StateMaxAge: 3 * time.Hour}
	})
	if age, _, _ := bucketLimits(t, js, "KV_"+queue.StateBucket); age != 3*time.Hour {
		t.Fatalf("state age = %s after ApplyLayout, want 3h", age)
	}
	// One server cannot hold three replicas: the error says so.
	_, err := queue.Connect(context.Background(), queue.Config{ConnectOptions: []nats.Option{s.ConnectOption()}, Replicas: 3, ApplyLayout: true})
	if err == nil || !strings.Contains(err.Error(), "replicas") {
		t.Fatalf("Replicas 3 on one server: %v", err)
	}
}

// A full state bucket drops its oldest records and keeps taking tasks.
func TestFullStateBucketDropsOldest(t *testing.T) {
	s := startNATS(t, "")
	c := connect(t, s, func(cfg *queue.Config) {
		cfg.ApplyLayout, cfg.Retention = true, queue.Retention{StateMaxBytes: 64 << 10}
	})
	ctx := context.Background()
	long := strings.Repeat("fix it ", 150)
	for i := range 200 {
		tk := newTask(fmt.Sprintf("t-full%03d", i))
		tk.Instruction = long
		if _, _, err := c.Submissions().Submit(ctx, tk); err != nil {
			t.Fatalf("submit %d into a full bucket: %v", i, err)
		}
	}
	if _, err := c.States().Status(ctx, "t-full199"); err != nil {
		t.Fatalf("newest task: %v", err)
	}
	kv, err := natstest.JetStream(t, s).KeyValue(ctx, queue.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "task.t-full000"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the oldest record in a bucket of 64 KiB: %v, want it dropped", err)
	}
	// Its message is still queued: the task is reported queued all the same.
	if st, err := c.States().Status(ctx, "t-full000"); err != nil || st.State != task.StateQueued {
		t.Fatalf("oldest task = %+v, %v", st, err)
	}
}

// artifactCompression is the compression of the artifact store's stream.
func artifactCompression(t *testing.T, js jetstream.JetStream) jetstream.StoreCompression {
	t.Helper()
	s, err := js.Stream(context.Background(), "OBJ_"+queue.ArtifactsBucket)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().Config.Compression
}

// The artifact store is uncompressed: a cluster node killed while writing
// a compressed one came back unable to read it (docs/reliability.md).
func TestArtifactStoreUncompressed(t *testing.T) {
	s := startNATS(t, "")
	warns := newWarnings()
	for range 2 { // creating, then finding it
		connect(t, s, func(cfg *queue.Config) { cfg.ApplyLayout, cfg.Logger = true, slog.New(warns) })
	}
	if got := artifactCompression(t, natstest.JetStream(t, s)); got != jetstream.NoCompression {
		t.Fatalf("new artifact store: compression %v, want none", got)
	}
	if w := warns.all(); len(w) != 0 {
		t.Errorf("warnings about an uncompressed store: %q", w)
	}
}

// A store an older version created compressed is made uncompressed by the
// next connection, a worker's too, and what it held still reads back,
// also once the server reloads it with the new config.
func TestCompressedArtifactStoreConverges(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := natsserver.Start(ctx, natsserver.Config{DataDir: dir}) // shut down below
	if err != nil {
		t.Fatal(err)
	}
	js := natstest.JetStream(t, s)
	old, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: queue.ArtifactsBucket, Storage: jetstream.FileStorage, Compression: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(strings.Repeat("+\tfixed line\n", 20000))
	if _, err := old.PutBytes(ctx, "t-old/patch.diff", patch); err != nil {
		t.Fatal(err)
	}
	warns := newWarnings()
	c := connect(t, s, func(cfg *queue.Config) { cfg.Logger = slog.New(warns) }) // a worker: no ApplyLayout
	if got := artifactCompression(t, js); got != jetstream.NoCompression {
		t.Fatalf("compressed store after connect: compression %v, want none", got)
	}
	if w := warns.all(); len(w) != 1 || !strings.Contains(w[0], "restart") {
		t.Errorf("warnings %q; want one telling to restart the NATS servers", w)
	}
	if got, err := c.Artifacts().Get(ctx, "t-old", "patch.diff"); err != nil || !bytes.Equal(got, patch) {
		t.Fatalf("old artifact after the update: %d bytes, %v", len(got), err)
	}
	if _, err := c.Artifacts().Put(ctx, "t-new", map[string][]byte{"log.txt": patch}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	s.Shutdown()

	s = startNATS(t, dir)
	c = connect(t, s)
	for _, id := range []string{"t-old", "t-new"} {
		name := map[string]string{"t-old": "patch.diff", "t-new": "log.txt"}[id]
		if got, err := c.Artifacts().Get(ctx, id, name); err != nil || !bytes.Equal(got, patch) {
			t.Fatalf("%s/%s after a restart: %d bytes, %v", id, name, len(got), err)
		}
	}
}
