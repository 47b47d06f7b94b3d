package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestInstallShim(t *testing.T) {
	data := t.TempDir()
	p1, err := installShim(data)
	if err != nil {
		t.Fatal(err)
	}
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
	p2, err := installShim(data)
	if err != nil || p2 != p1 {
		t.Fatalf("second install: %s, %v; want %s reused", p2, err, p1)
	}
	if again, _ := os.Stat(p2); !again.ModTime().Equal(before) {
		t.Error("second install copied again")
	}
	if list, _ := os.ReadDir(filepath.Join(data, "bin")); len(list) != 1 {
		t.Errorf("bin holds %d entries, want 1 (no temp files left)", len(list))
	}
}
