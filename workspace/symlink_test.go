package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/wrenchworks/wrench/task"
)

// hostFiles plants files outside every workspace: what a symlink inside a
// workspace may point at and host-side code must never read or write.
type hostFiles struct {
	dir, secret, secretData, ignore, subdir string
}

func plantHost(t *testing.T) hostFiles {
	t.Helper()
	h := hostFiles{dir: t.TempDir()}
	h.secret = filepath.Join(h.dir, "secret.txt")
	h.secretData = "TOP SECRET host data\n"
	must(t, os.WriteFile(h.secret, []byte(h.secretData), 0o600))
	h.ignore = filepath.Join(h.dir, "ignore")
	must(t, os.WriteFile(h.ignore, []byte("new.txt\n"), 0o644))
	h.subdir = filepath.Join(h.dir, "sub")
	must(t, os.MkdirAll(h.subdir, 0o755))
	must(t, os.WriteFile(filepath.Join(h.subdir, "keep.txt"), []byte("keep\n"), 0o644))
	return h
}

// check fails the test when anything outside changed.
func (h hostFiles) check(t *testing.T) {
	t.Helper()
	if data, err := os.ReadFile(h.secret); err != nil || string(data) != h.secretData {
		t.Errorf("host file changed: %q, %v", data, err)
	}
	des, err := os.ReadDir(h.subdir)
	if err != nil || len(des) != 1 || des[0].Name() != "keep.txt" {
		t.Errorf("host directory changed: %v, %v", des, err)
	}
	if data, err := os.ReadFile("/etc/passwd"); err != nil || len(data) == 0 {
		t.Errorf("/etc/passwd: %v", err)
	}
}

func TestSymlinksNeverFollowed(t *testing.T) {
	fx := newFixture(t)
	m, _ := testManager(t, false, nil)
	host := plantHost(t)
	w, err := m.Open(ctxT(t), "t", task.Repo{URL: fx.dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	d := w.Dir()
	baseList := fullListing(t, d)

	// Plant links to host files and directories, and put links where
	// tracked files and directories were.
	must(t, os.Symlink(host.secret, filepath.Join(d, "leak")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(d, "passwd")))
	must(t, os.Symlink(host.subdir, filepath.Join(d, "leakdir")))
	must(t, os.Remove(filepath.Join(d, "README.md")))
	must(t, os.Symlink(host.secret, filepath.Join(d, "README.md")))
	must(t, os.RemoveAll(filepath.Join(d, "src")))
	must(t, os.Symlink(host.subdir, filepath.Join(d, "src")))
	must(t, os.Remove(filepath.Join(d, ".gitignore")))
	must(t, os.Symlink(host.ignore, filepath.Join(d, ".gitignore")))
	writeFile(t, d, "new.txt", "new\n", 0o644)

	// Reads: a checkpoint records links as links and never reads targets.
	cp, err := w.Checkpoint(ctxT(t), "links")
	if err != nil {
		t.Fatal(err)
	}
	passwd, _ := os.ReadFile("/etc/passwd")
	for name, data := range map[string][]byte{
		"host secret": []byte(host.secretData),
		"/etc/passwd": passwd,
		"host dir":    []byte("keep\n"),
		"host ignore": []byte("new.txt\n"),
	} {
		if w.st.HasEncodedObject(blobHash(data)) == nil {
			t.Errorf("the state repository holds the content of %s", name)
		}
	}
	tree := w.checkpoints[plumbing.NewHash(cp)]
	flat, err := flatten(w.st, tree)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"leak", "passwd", "leakdir", "README.md", "src", ".gitignore"} {
		if flat[p].Mode.String() != "0120000" {
			t.Errorf("%s recorded with mode %v, want a symlink", p, flat[p].Mode)
		}
	}
	if _, ok := flat["src/keep.txt"]; ok {
		t.Error("the snapshot descended into a symlinked directory")
	}

	// Diffs show link targets only; a followed .gitignore link would have
	// hidden new.txt.
	patch, err := w.Diff(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(patch, "TOP SECRET") || strings.Contains(patch, "root:") || strings.Contains(patch, "keep") {
		t.Errorf("diff leaked a link target's content:\n%s", patch)
	}
	if !strings.Contains(patch, "+"+host.secret) || !strings.Contains(patch, "b/new.txt") {
		t.Errorf("diff lacks the link target or new.txt:\n%s", patch)
	}

	// Writes: rollback replaces the links, never writes through them.
	if err := w.Rollback(ctxT(t), w.BaseCheckpoint()); err != nil {
		t.Fatal(err)
	}
	if got := fullListing(t, d); got != baseList {
		t.Errorf("after rollback:\n%s\nwant:\n%s", got, baseList)
	}
	host.check(t)
	if err := w.Rollback(ctxT(t), cp); err != nil {
		t.Fatal(err)
	}
	host.check(t)
	// A link where the checkpoint has a file in a directory: the file goes
	// into a fresh directory, not through the link.
	must(t, os.Remove(filepath.Join(d, "src")))
	must(t, os.Mkdir(filepath.Join(d, "src"), 0o755))
	writeFile(t, d, "src/keep.txt", "workspace copy\n", 0o644)
	cp2, err := w.Checkpoint(ctxT(t), "src dir")
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.RemoveAll(filepath.Join(d, "src")))
	must(t, os.Symlink(host.subdir, filepath.Join(d, "src")))
	if err := w.Rollback(ctxT(t), cp2); err != nil {
		t.Fatal(err)
	}
	host.check(t)
	if data, _ := os.ReadFile(filepath.Join(d, "src/keep.txt")); string(data) != "workspace copy\n" {
		t.Errorf("src/keep.txt = %q", data)
	}

	// .git itself replaced by a link: snapshots skip it, Close removes the
	// link and not its target.
	must(t, os.Rename(filepath.Join(d, ".git"), filepath.Join(d, "..", "moved-git")))
	must(t, os.Symlink(host.dir, filepath.Join(d, ".git")))
	if _, err := w.Checkpoint(ctxT(t), "with .git link"); err != nil {
		t.Fatal(err)
	}
	must(t, w.Close())
	host.check(t)
	if _, err := os.Stat(host.ignore); err != nil {
		t.Errorf("Close removed a file through the .git link: %v", err)
	}
}

func TestRemoveDoesNotFollowLinks(t *testing.T) {
	fx := newFixture(t)
	m, _ := testManager(t, false, nil)
	host := plantHost(t)
	w, err := m.Open(ctxT(t), "t", task.Repo{URL: fx.dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.Symlink(host.subdir, filepath.Join(w.Dir(), "leakdir")))
	must(t, os.Symlink(host.secret, filepath.Join(w.Dir(), "leak")))
	list, err := m.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %v, %v", list, err)
	}
	must(t, m.Remove(list[0]))
	host.check(t)
	if _, err := os.Stat(w.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("workspace still there: %v", err)
	}
	// Remove refuses paths that are not workspaces under Root.
	for _, dir := range []string{host.dir, filepath.Join(m.cfg.Root, "..", "x"), m.cfg.Root} {
		if err := m.Remove(Info{Dir: dir}); err == nil {
			t.Errorf("Remove(%s) succeeded", dir)
		}
	}
	host.check(t)
}
