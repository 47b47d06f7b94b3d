package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/queue"
)

// storeDir is the JetStream store directory of node n.
func (n *natsNode) storeDir(t testing.TB) string {
	t.Helper()
	i := slices.Index(n.args, "--store-dir")
	if i < 0 || i+1 >= len(n.args) {
		t.Fatalf("%s has no --store-dir", n.name)
	}
	return n.args[i+1]
}

// artifactBlock is the path of message block index of the artifact store
// in node n's store ("" while it does not exist).
func (n *natsNode) artifactBlock(t testing.TB, index int) string {
	t.Helper()
	var found string
	want := filepath.Join("OBJ_"+queue.ArtifactsBucket, "msgs", fmt.Sprintf("%d.blk", index))
	_ = filepath.WalkDir(n.storeDir(t), func(path string, _ fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, string(filepath.Separator)+want) {
			found = path
			return fs.SkipAll
		}
		return nil
	})
	return found
}

// someArtifact is about size bytes of text like a trajectory or a log:
// this package's source, repeated with a counter.
func someArtifact(t testing.TB, i, size int) []byte {
	t.Helper()
	src, err := os.ReadFile("cluster_e2e_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for line := 0; b.Len() < size; line++ {
		fmt.Fprintf(&b, "{\"artifact\":%d,\"line\":%d,\"text\":%q}\n", i, line, src[line%len(src):min(line%len(src)+120, len(src))])
	}
	return b.Bytes()
}

// TestClusterArtifactsSurviveKill: a node of a three-node cluster SIGKILLed
// after the artifact store's first block filled comes back with the store
// readable. With the S2 compression the store used to have, it did not:
// on restart the node truncates each R3 stream to its last Raft snapshot
// and replays the Raft log (sync always, as Wrench's nodes run); the
// truncation cut a block compressed in its previous life as if it were
// not, and the node failed with "s2: corrupt input" (docs/reliability.md,
// Chaos).
func TestClusterArtifactsSurviveKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startNATSCluster(t, ctx, 3)
	conn, err := queue.Connect(ctx, queue.Config{URL: c.urls(), Replicas: 3, ApplyLayout: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	nc, err := nats.Connect(c.urls(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	stream := "OBJ_" + queue.ArtifactsBucket
	leader, err := c.streamLeader(ctx, nc, stream)
	if err != nil {
		t.Fatal(err)
	}
	var victim *natsNode
	for _, n := range c.nodes {
		if n.name != leader {
			victim = n
			break
		}
	}
	const size = 1 << 20
	stored := map[string][]byte{}
	put := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			id, art := fmt.Sprintf("t-art-%02d", i), someArtifact(t, i, size)
			if _, err := conn.Artifacts().Put(ctx, id, map[string][]byte{"trajectory.jsonl": art}); err != nil {
				t.Fatalf("put %s: %v", id, err)
			}
			stored[id] = art
		}
	}

	// A clean restart leaves the follower a Raft snapshot in block 1.
	put(0, 3)
	if err := c.waitCurrent(ctx, nc, stream); err != nil {
		t.Fatal(err)
	}
	if err := victim.proc.stop(t); err != nil {
		t.Fatalf("stop %s: %v", victim.name, err)
	}
	c.start(ctx, victim)
	if err := c.waitCurrent(ctx, nc, stream); err != nil {
		t.Fatal(err)
	}
	// Past one block (8 MiB): block 1 is finished, and compressed if the
	// store compresses.
	put(3, 12)
	if err := c.waitCurrent(ctx, nc, stream); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	compressed := s.CachedInfo().Config.Compression != jetstream.NoCompression
	for victim.artifactBlock(t, 2) == "" || compressed && !blockCompressed(t, victim.artifactBlock(t, 1)) {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: block 1 never finished (compressed store: %v)", victim.name, compressed)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Logf("%s: block 1 finished, compressed %v; SIGKILL", victim.name, blockCompressed(t, victim.artifactBlock(t, 1)))
	victim.proc.kill()
	c.start(ctx, victim)
	waitRecovered(t, ctx, victim)
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	err = c.waitCurrent(wctx, nc, stream)
	wcancel()
	if err != nil {
		t.Errorf("after restarting %s: %v", victim.name, err)
	}
	if !c.moveLeader(ctx, nc, stream, victim.name) {
		t.Errorf("%s could not take over %s", victim.name, stream)
	}
	for id, want := range stored {
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		got, err := conn.Artifacts().Get(rctx, id, "trajectory.jsonl")
		rcancel()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s read through %s: %d bytes, %v", id, victim.name, len(got), err)
		}
	}
}

// storeFailures are what a node logs when its store cannot read a block.
var storeFailures = []string{"Critical write error", "compression reader"}

// waitRecovered waits until node n's /healthz answers 200, and fails the
// test as soon as n logs that its store failed.
func waitRecovered(t testing.TB, ctx context.Context, n *natsNode) {
	t.Helper()
	for {
		out := n.proc.out.String()
		for _, bad := range storeFailures {
			if i := strings.Index(out, bad); i >= 0 {
				t.Fatalf("%s logged %q after the kill:\n%s", n.name, bad, out[max(0, i-300):min(len(out), i+600)])
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.monitor+"/healthz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never recovered", n.name)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// blockCompressed reports whether the message block at path starts with
// nats-server's S2 compression header.
func blockCompressed(t testing.TB, path string) bool {
	t.Helper()
	if path == "" {
		return false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	return bytes.HasPrefix(b, []byte("cmp\x01"))
}
