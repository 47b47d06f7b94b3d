package workspace

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wrenchworks/wrench/task"
)

func TestMirrorReuseAndUpdate(t *testing.T) {
	fx := newFixture(t)
	m, logs := testManager(t, true, nil)
	open := func(repo task.Repo) *Workspace {
		t.Helper()
		w, err := m.Open(ctxT(t), "t", repo, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return w
	}
	steps := []struct {
		name       string
		repo       task.Repo
		before     func()
		wantMirror string
	}{
		{name: "first", repo: task.Repo{URL: fx.dir}, wantMirror: "created"},
		{name: "second", repo: task.Repo{URL: fx.dir}, wantMirror: "reused"},
		{name: "same repo as file URL", repo: task.Repo{URL: "file://" + fx.dir}, wantMirror: "reused"},
		{name: "other ref", repo: task.Repo{URL: fx.dir, Ref: "feature"}, wantMirror: "reused"},
		{name: "pinned commit", repo: task.Repo{URL: fx.dir, Commit: fx.first}, wantMirror: "reused"},
		{name: "new upstream commit", repo: task.Repo{URL: fx.dir}, wantMirror: "updated", before: func() {
			writeFile(t, fx.dir, "loose.txt", "a loose object\n", 0o644)
			runGit(t, fx.dir, "add", "-A")
			runGit(t, fx.dir, "commit", "-q", "-m", "loose")
		}},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		w := open(s.repo)
		if w.CloneInfo().Mirror != s.wantMirror || !w.CloneInfo().CheckoutCache {
			t.Errorf("%s: info %+v, want mirror %q from the checkout cache", s.name, w.CloneInfo(), s.wantMirror)
		}
		rev := s.repo.Ref
		if rev == "" {
			rev = "HEAD"
		}
		want := runGit(t, fx.dir, "rev-parse", rev+"^{commit}")
		if s.repo.Commit != "" {
			want = s.repo.Commit
		}
		if w.BaseCommit() != want {
			t.Errorf("%s: commit %s, want %s", s.name, w.BaseCommit(), want)
		}
		if got, wantList := treeListing(t, w.Dir()), gitTreeListing(t, fx.dir, want); got != wantList {
			t.Errorf("%s: tree\n%s\nwant\n%s", s.name, got, wantList)
		}
		if st := runGit(t, w.Dir(), "status", "--porcelain"); st != "" {
			t.Errorf("%s: git status:\n%s", s.name, st)
		}
	}
	if st := m.Stats(); st.MirrorMisses != 1 || st.MirrorHits != int64(len(steps)-1) {
		t.Errorf("stats %+v", st)
	}
	if !strings.Contains(logs.String(), "mirror=reused") {
		t.Errorf("log lacks the mirror state:\n%s", logs)
	}
	// One mirror for the path and its file:// URL.
	hosts, _ := filepath.Glob(filepath.Join(m.cfg.MirrorDir, "local", "*"))
	if len(hosts) != 1 {
		t.Errorf("mirrors: %v", hosts)
	}
}

func TestMirrorConcurrentOpens(t *testing.T) {
	fx := newFixture(t)
	base := t.TempDir()
	const n = 6
	// Two managers sharing one mirror directory stand for two worker
	// processes on one host.
	var managers [2]*Manager
	for i := range managers {
		var err error
		managers[i], err = NewManager(Config{
			Root:       filepath.Join(base, fmt.Sprintf("ws%d", i)),
			MirrorDir:  filepath.Join(base, "mirrors"),
			Deployment: "test",
			Logger:     slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	refs := []task.Repo{{URL: fx.dir}, {URL: fx.dir, Ref: "feature"}, {URL: fx.dir, Commit: fx.first}}
	var wg sync.WaitGroup
	errs := make([]error, n)
	ws := make([]*Workspace, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws[i], errs[i] = managers[i%2].Open(ctxT(t), fmt.Sprintf("t%d", i), refs[i%len(refs)], nil)
		}()
	}
	wg.Wait()
	created := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("open %d: %v", i, errs[i])
		}
		defer ws[i].Close()
		if ws[i].CloneInfo().Mirror == "created" {
			created++
		}
		runGit(t, ws[i].Dir(), "fsck", "--no-progress")
		want := gitTreeListing(t, fx.dir, ws[i].BaseCommit())
		if got := treeListing(t, ws[i].Dir()); got != want {
			t.Errorf("open %d: tree\n%s\nwant\n%s", i, got, want)
		}
	}
	if created != 1 {
		t.Errorf("%d Opens created the mirror, want 1", created)
	}
}

func TestCheckoutCacheEviction(t *testing.T) {
	fx := newFixture(t)
	m, _ := testManager(t, true, func(c *Config) { c.CheckoutCache = 2 })
	for _, repo := range []task.Repo{{URL: fx.dir, Commit: fx.first}, {URL: fx.dir, Commit: fx.second}, {URL: fx.dir, Commit: fx.feature}} {
		w, err := m.Open(ctxT(t), "t", repo, nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	if cached := cachedCheckouts(t, m.cfg.MirrorDir); len(cached) != 2 {
		t.Errorf("cached checkouts: %v, want 2", cached)
	}
	// Disabled cache: the tree is decoded from objects.
	m2, _ := testManager(t, true, func(c *Config) { c.CheckoutCache = -1 })
	w, err := m2.Open(ctxT(t), "t", task.Repo{URL: fx.dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.CloneInfo().CheckoutCache {
		t.Error("checkout cache used while disabled")
	}
	if cached := cachedCheckouts(t, m2.cfg.MirrorDir); len(cached) != 0 {
		t.Errorf("cached checkouts while disabled: %v", cached)
	}
}

func TestLocalSourceWithLooseObjectsAndAlternates(t *testing.T) {
	fx := newFixture(t)
	// A clone sharing fx's objects through objects/info/alternates, with
	// a loose commit of its own.
	shared := filepath.Join(t.TempDir(), "shared")
	runGit(t, "", "clone", "-q", "--shared", fx.dir, shared)
	writeFile(t, shared, "own.txt", "own\n", 0o644)
	runGit(t, shared, "add", "-A")
	runGit(t, shared, "commit", "-q", "-m", "own")
	if _, err := os.Stat(filepath.Join(shared, ".git", "objects", "info", "alternates")); err != nil {
		t.Fatal(err)
	}
	for _, mirror := range []bool{false, true} {
		m, _ := testManager(t, mirror, nil)
		w, err := m.Open(ctxT(t), "t", task.Repo{URL: shared}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := treeListing(t, w.Dir()), gitTreeListing(t, shared, "HEAD"); got != want {
			t.Errorf("tree\n%s\nwant\n%s", got, want)
		}
		// The workspace is self-contained: no alternates outside it.
		if _, err := os.Stat(filepath.Join(w.Dir(), ".git", "objects", "info", "alternates")); err == nil {
			t.Error("workspace has an alternates file")
		}
		runGit(t, w.Dir(), "fsck", "--no-progress", "--full")
		w.Close()
	}
}

// cachedCheckouts lists the checkout cache entries under a mirror dir.
func cachedCheckouts(t *testing.T, mirrorDir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(mirrorDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && filepath.Base(filepath.Dir(p)) == "checkouts" {
			out = append(out, p)
			return filepath.SkipDir
		}
		return nil
	})
	return out
}
