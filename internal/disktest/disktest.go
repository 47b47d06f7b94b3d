// Package disktest gives tests a small file system of their own to fill:
// a tmpfs mounted for the test, so that a full disk is real (ENOSPC from
// the kernel) and nothing else on the machine feels it.
package disktest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size (mount's size=, e.g. "64m") on a new
// directory and unmounts it when the test ends. Mounting needs root: a
// test run by another user is skipped, saying so; as root, a mount that
// fails fails the test under CI=true and skips it otherwise.
func Mount(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("disktest: mounting a tmpfs needs root; skipping the full-disk test")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("disktest: mount a tmpfs as root under CI=true: %v: %s", err, out)
		}
		t.Skipf("disktest: mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		// Lazily: a server the test started may still hold files there.
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("disktest: umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// Fill writes a file in dir until its file system has no byte left
// (ENOSPC) and returns the function that removes it, giving the space
// back.
func Fill(t testing.TB, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "disktest.fill")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatalf("disktest: %v", err)
	}
	defer f.Close()
	block := make([]byte, 1<<20)
	for n := len(block); n > 0; {
		if _, err := f.Write(block[:n]); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("disktest: fill %s: %v", dir, err)
			}
			n /= 2 // the last blocks: down to a byte
		}
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Errorf("disktest: free %s: %v", dir, err)
		}
	}
}

// Free reports the bytes free in dir's file system.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatalf("disktest: statfs %s: %v", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
