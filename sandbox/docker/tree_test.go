package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker"
)

// slowReader hands out its bytes in small pieces, pausing before each: a
// large repository's tree on a busy machine.
type slowReader struct {
	r     io.Reader
	pause time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(s.pause)
	return s.r.Read(p[:min(len(p), 512)])
}

// slowTree is a tar stream of one file under /workspace that takes about
// 10 s to read.
func slowTree(t *testing.T) io.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := strings.Repeat("x", 4000)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "workspace/", Mode: 0o755, Uid: 1000, Gid: 1000})
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "workspace/big.txt", Mode: 0o644, Size: int64(len(body)), Uid: 1000, Gid: 1000})
	tw.Write([]byte(body))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &slowReader{r: &buf, pause: 10 * time.Second / time.Duration(buf.Len()/512+1)}
}

// TestTreeCopyHasItsOwnBound: copying a sandbox's tree is bounded by
// TreeTimeout, not by ReadyTimeout (a large repository on a busy machine
// takes longer to copy than a container takes to start), and TreeTimeout
// does bound it.
func TestTreeCopyHasItsOwnBound(t *testing.T) {
	f := newFixture(t, func(c *docker.Config) { c.ReadyTimeout = 8 * time.Second })
	sb := f.start(t, sandbox.Spec{WritableRoot: true, Tree: slowTree(t)})
	if res := run(t, sb, "wc -c < /workspace/big.txt"); strings.TrimSpace(string(res.Output)) != "4000" {
		t.Errorf("tree not copied: %q", res.Output)
	}

	f = newFixture(t, func(c *docker.Config) { c.TreeTimeout = time.Second })
	sb2, err := f.p.Start(context.Background(), sandbox.Spec{WritableRoot: true, Tree: slowTree(t)})
	if err == nil {
		sb2.Close(context.Background())
		t.Fatal("a 10 s copy under a 1 s TreeTimeout succeeded")
	}
	if !strings.Contains(err.Error(), "copy workspace") {
		t.Errorf("error %v, want one about copying the workspace", err)
	}
}
