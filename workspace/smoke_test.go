package workspace

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wrenchworks/wrench/task"
)

func TestSmoke(t *testing.T) {
	fx := newFixture(t)
	for _, mirror := range []bool{false, true} {
		m, logs := testManager(t, mirror, nil)
		w, err := m.Open(ctxT(t), "t1", task.Repo{URL: fx.dir}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("info %+v base %s", w.CloneInfo(), w.BaseCommit())
		t.Log(runGit(t, w.Dir(), "status", "--short"))
		t.Log(runGit(t, w.Dir(), "log", "--oneline", "-3"))
		os.WriteFile(filepath.Join(w.Dir(), "README.md"), []byte("changed\n"), 0o644)
		os.WriteFile(filepath.Join(w.Dir(), "new.txt"), []byte("new\n"), 0o644)
		os.Remove(filepath.Join(w.Dir(), "src/main.go"))
		d, err := w.Diff(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Log(d)
		if err := w.Rollback(ctxT(t), w.BaseCheckpoint()); err != nil {
			t.Fatal(err)
		}
		d, _ = w.Diff(ctxT(t))
		if d != "" {
			t.Fatalf("diff after rollback: %s", d)
		}
		t.Log(logs.String())
		w.Close()
	}
}
