package workspace

import (
	"bytes"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

func TestListAndRemove(t *testing.T) {
	fx := newFixture(t)
	m, _ := testManager(t, false, nil)
	other, err := NewManager(Config{Root: m.cfg.Root, Deployment: "other"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	w1, err := m.Open(ctxT(t), "task-a", task.Repo{URL: fx.dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := other.Open(ctxT(t), "task-b", task.Repo{URL: fx.dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	// A directory a crash left before it was labelled.
	stray := filepath.Join(m.cfg.Root, "stray-0000")
	must(t, os.Mkdir(stray, 0o700))

	list, err := m.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Fatalf("List = %+v, want this deployment's workspace and the stray directory", list)
	}
	var got Info
	for _, in := range list {
		if in.Dir == stray {
			if in.Deployment != "" || in.TaskID != "" || in.Created.IsZero() {
				t.Errorf("stray entry %+v", in)
			}
			continue
		}
		got = in
	}
	host, _ := os.Hostname()
	if got.TaskID != "task-a" || got.Deployment != "test" || got.OwnerPID != os.Getpid() || got.OwnerHost != host ||
		got.Created.Before(start.Add(-time.Second)) || got.Created.After(time.Now()) || got.Dir != filepath.Dir(w1.Dir()) {
		t.Errorf("Info = %+v", got)
	}
	for _, in := range list {
		must(t, m.Remove(in))
		must(t, m.Remove(in)) // idempotent
	}
	if _, err := os.Stat(w1.Dir()); err == nil {
		t.Error("removed workspace still on disk")
	}
	// The other deployment's workspace is untouched, and Close after
	// Remove is fine.
	if _, err := os.Stat(w2.Dir()); err != nil {
		t.Errorf("other deployment's workspace: %v", err)
	}
	must(t, w1.Close())
	if list, _ := m.List(); len(list) != 0 {
		t.Errorf("List after Remove = %+v", list)
	}
}

func TestOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing file owners needs root")
	}
	fx := newFixture(t)
	owner := &Owner{UID: sandbox.UID, GID: sandbox.GID}
	for _, mirror := range []bool{false, true} {
		t.Run(fmt.Sprintf("mirror=%v", mirror), func(t *testing.T) {
			m, _ := testManager(t, mirror, func(c *Config) { c.Owner = owner })
			host := plantHost(t)
			w, err := m.Open(ctxT(t), "t", task.Repo{URL: fx.dir}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			checkOwners(t, w.Dir(), owner)
			// Restored files and directories belong to the owner too, and a
			// symlink to a host file is never chowned through.
			must(t, os.Symlink(host.secret, filepath.Join(w.Dir(), "leak")))
			must(t, os.RemoveAll(filepath.Join(w.Dir(), "src")))
			cp, err := w.Checkpoint(ctxT(t), "x")
			if err != nil {
				t.Fatal(err)
			}
			must(t, w.Rollback(ctxT(t), w.BaseCheckpoint()))
			must(t, os.Symlink(host.secret, filepath.Join(w.Dir(), "README.md.new")))
			must(t, w.Rollback(ctxT(t), cp))
			checkOwners(t, w.Dir(), owner)
			fi, _ := os.Stat(host.secret)
			if st := fi.Sys().(*syscall.Stat_t); st.Uid != uint32(os.Geteuid()) {
				t.Errorf("host file owner changed to %d", st.Uid)
			}
		})
	}
}

// checkOwners fails for any path under dir not owned by owner, except
// read-only pack files shared by hard link (owned by this process, which
// the owner cannot modify).
func checkOwners(t *testing.T, dir string, owner *Owner) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) == owner.UID && int(st.Gid) == owner.GID {
			return nil
		}
		if strings.Contains(p, "/objects/pack/") && st.Nlink > 1 && fi.Mode().Perm()&0o222 == 0 && int(st.Uid) == os.Geteuid() {
			return nil
		}
		t.Errorf("%s owned by %d:%d (mode %v)", p, st.Uid, st.Gid, fi.Mode())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestAuthNeverFormatted(t *testing.T) {
	const token = "ghp_verysecret"
	a := localToken(token)
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "auth", a, "auth2", *a)
	for _, s := range []string{
		fmt.Sprintf("%v %+v %#v %s", a, a, a, a),
		fmt.Sprintf("%v %+v %#v %s", *a, *a, *a, *a),
		buf.String(),
	} {
		if strings.Contains(s, token) {
			t.Errorf("token formatted: %s", s)
		}
	}
}
