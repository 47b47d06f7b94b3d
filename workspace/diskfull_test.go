package workspace

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wrenchworks/wrench/internal/disktest"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// TestDiffOnAFullDiskSaysSo: a diff whose objects cannot be written (the
// workspace's disk is full, a real tmpfs) fails with the disk's error,
// not "file changed while being read", and is no partial patch: the
// worker must not call the task resolved without it.
func TestDiffOnAFullDiskSaysSo(t *testing.T) {
	fx := newFixture(t)
	m, _ := testManager(t, true, nil)
	host, err := m.Open(ctxT(t), "t-full", task.Repo{URL: fx.dir, Commit: fx.second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := host.Export(ctxT(t), &buf, Owner{UID: os.Getuid(), GID: os.Getgid()}); err != nil {
		t.Fatal(err)
	}
	host.Close()
	root := disktest.Mount(t, "48m")
	extract(t, &buf, root)
	w, err := Reopen(ctxT(t), ReopenConfig{Tree: filepath.Join(root, "workspace"), State: filepath.Join(root, ".wrench/state")})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, size := range []int{1 << 20, streamThreshold + 1<<20} { // read whole, and streamed
		big := make([]byte, size)
		if _, err := rand.Read(big); err != nil { // incompressible
			t.Fatal(err)
		}
		name := "big-" + strings.Repeat("x", size%7) + ".bin"
		if err := os.WriteFile(filepath.Join(root, "workspace", name), big, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	free := disktest.Fill(t, root)
	defer free()
	_, err = w.Diff(ctxT(t))
	if !errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "changed while being read") {
		t.Fatalf("diff on a full disk: %v; want the disk's ENOSPC", err)
	}
	if errors.Is(err, sandbox.ErrPartialPatch) {
		t.Errorf("a failed diff matches ErrPartialPatch: %v", err)
	}
}
