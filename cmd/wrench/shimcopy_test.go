package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestInstallShim(t *testing.T) {
	data := t.TempDir()
	p1, rel1, err := installShim(data, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer rel1()
	if filepath.Dir(p1) != filepath.Join(data, "bin") {
		t.Fatalf("installed at %s, want under %s/bin", p1, data)
	}
	exe, _ := os.Executable()
	want, _ := os.Stat(exe)
	got, err := os.Stat(p1)
	if err != nil || got.Size() != want.Size() || got.Mode().Perm()&0o111 == 0 {
		t.Fatalf("copy %v (%v), want an executable of %d bytes", got, err, want.Size())
	}
	before := got.ModTime()
	p2, rel2, err := installShim(data, slog.Default())
	if err != nil || p2 != p1 {
		t.Fatalf("second install: %s, %v; want %s reused", p2, err, p1)
	}
	defer rel2()
	if again, _ := os.Stat(p2); !again.ModTime().Equal(before) {
		t.Error("second install copied again")
	}
	if list, _ := os.ReadDir(filepath.Join(data, "bin")); len(list) != 1 {
		t.Errorf("bin holds %d entries, want 1 (no temp files left)", len(list))
	}
}

// TestInstallShimPrunesOldCopies: copies of other builds, a hand-installed
// bin/wrench and interrupted copies go at start; a copy another process
// still uses (it holds a lock on it) and files that are not wrench's stay.
func TestInstallShimPrunesOldCopies(t *testing.T) {
	data := t.TempDir()
	bin := filepath.Join(data, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"wrench-1-2", "wrench-3-4", "wrench", ".wrench-123", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("old"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Another process's copy in use: a shared lock, as installShim takes.
	busy, err := os.Open(filepath.Join(bin, "wrench-3-4"))
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if err := syscall.Flock(int(busy.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	p, rel, err := installShim(data, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer rel()
	var names []string
	entries, _ := os.ReadDir(bin)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{filepath.Base(p), "notes.txt", "wrench-3-4"}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("bin holds %v, want %v", names, want)
	}
	// Once released, the next start (of another build) removes it.
	busy.Close()
	rel()
	pruneShims(bin, filepath.Join(bin, "wrench-9-9"), slog.Default())
	if _, err := os.Stat(filepath.Join(bin, "wrench-3-4")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("released copy still there: %v", err)
	}
}

// TestShimDirErrorNamesOwnerAndFix: a data directory wrench's user cannot
// write is reported with its owner and the chown that fixes it.
func TestShimDirErrorNamesOwnerAndFix(t *testing.T) {
	data := t.TempDir()
	err := shimDirError(filepath.Join(data, "bin"), &fs.PathError{Op: "mkdir", Path: data, Err: fs.ErrPermission})
	msg := err.Error()
	for _, want := range []string{"permission denied", data + " belongs to uid", fmt.Sprintf("chown -R %d:%d %s", os.Getuid(), os.Getgid(), data)} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
}
