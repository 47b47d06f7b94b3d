package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/task"
)

// TestOpenIn clones into a given empty directory (a warm sandbox's), keeps
// checkpoints, rollback and diffs working there, and removes it on Close.
func TestOpenIn(t *testing.T) {
	fx := newFixture(t)
	for _, mirror := range []bool{false, true} {
		m, _ := testManager(t, mirror, nil)
		dir := filepath.Join(t.TempDir(), "warm-1")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := m.OpenIn(ctxT(t), "task-in", dir, task.Repo{URL: fx.dir}, nil)
		if err != nil {
			t.Fatalf("OpenIn: %v", err)
		}
		if w.Dir() != dir || w.BaseCommit() != fx.second {
			t.Fatalf("Dir %s commit %s; want %s at %s", w.Dir(), w.BaseCommit(), dir, fx.second)
		}
		if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
			t.Fatalf("no .git in the given directory: %v", err)
		}
		base, _ := w.Checkpoint(ctxT(t), "base")
		if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("hi\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		diff, err := w.Diff(ctxT(t))
		if err != nil || !strings.Contains(diff, "+++ b/new.txt") {
			t.Fatalf("diff %q, %v", diff, err)
		}
		if err := w.Rollback(ctxT(t), base); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "new.txt")); !os.IsNotExist(err) {
			t.Fatalf("rollback left new.txt: %v", err)
		}
		if list, _ := m.List(); len(list) != 1 || list[0].TaskID != "task-in" {
			t.Fatalf("List = %+v, want the labelled workspace", list)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("Close left the working directory: %v", err)
		}
		if list, _ := m.List(); len(list) != 0 {
			t.Errorf("Close left %d labelled workspaces", len(list))
		}
	}
}

func TestOpenInRefusesBadDirectories(t *testing.T) {
	fx := newFixture(t)
	m, _ := testManager(t, false, nil)
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), nil, 0o644)
	for name, dir := range map[string]string{"not empty": full, "relative": "warm", "missing": filepath.Join(t.TempDir(), "nope")} {
		if w, err := m.OpenIn(ctxT(t), "t", dir, task.Repo{URL: fx.dir}, nil); err == nil {
			w.Close()
			t.Errorf("%s: OpenIn(%s) succeeded", name, dir)
		}
	}
	if _, err := os.Stat(filepath.Join(full, "x")); err != nil {
		t.Errorf("a refused OpenIn touched the directory: %v", err)
	}
}
