package docker

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// dirSize counts what a layer holds as the engine does: files' apparent
// sizes, a hard-linked file once, a symlink as itself, directories the
// sandbox user locked (as root) included.
func TestDirSize(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, n int) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a", 1000)
	write("sub/b", 2000)
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "a-again")); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(target, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	want := int64(1000 + 2000 + len(target))
	if os.Geteuid() == 0 {
		write("locked/c", 4000)
		if err := os.Chmod(filepath.Join(dir, "locked"), 0); err != nil {
			t.Fatal(err)
		}
		want += 4000
	}
	got, err := dirSize(context.Background(), dir)
	if err != nil || got != want {
		t.Fatalf("dirSize = %d, %v; want %d", got, err, want)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 2048 {
		write(filepath.Join("many", strconv.Itoa(i)), 1)
	}
	if _, err := dirSize(ctx, dir); err == nil {
		t.Error("dirSize went on after its context ended")
	}
}
