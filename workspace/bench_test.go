package workspace

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/wrenchworks/wrench/internal/genrepo"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// benchRepo is the generated benchmark repository, made once per process
// (it takes a while) and removed by TestMain.
var benchRepo struct {
	once sync.Once
	dir  string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchRepo.dir != "" {
		os.RemoveAll(filepath.Dir(benchRepo.dir))
	}
	os.Exit(code)
}

// benchRepository returns the generated repository; WRENCH_BENCH_REPO
// names a directory to keep it in across runs (generated when missing).
func benchRepository(b *testing.B) string {
	if dir := os.Getenv("WRENCH_BENCH_REPO"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
			genrepo.Generate(b, dir, genrepo.Bench)
		}
		return dir
	}
	benchRepo.once.Do(func() {
		tmp, err := os.MkdirTemp("", "wrench-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchRepo.dir = filepath.Join(tmp, "repo")
		genrepo.Generate(b, benchRepo.dir, genrepo.Bench)
	})
	if benchRepo.dir == "" {
		b.Fatal("benchmark repository not generated")
	}
	return benchRepo.dir
}

// BenchmarkClone compares cloning the generated repository with the git
// CLI against Open with an empty mirror directory (first), Open from a
// warm mirror (mirror; the target is 300 ms) and Open without mirrors
// (direct), with `cp -a` of the checked-out tree as the file system's
// floor (cp_tree). Workspaces are given to uid 1000 when running as root, as in
// production.
func BenchmarkClone(b *testing.B) {
	requireGit(b)
	repo := benchRepository(b)
	var owner *Owner
	if os.Geteuid() == 0 {
		owner = &Owner{UID: sandbox.UID, GID: sandbox.GID}
	}
	newManager := func(b *testing.B, base string, mirror bool) *Manager {
		cfg := Config{Root: filepath.Join(base, "ws"), Deployment: "bench", Owner: owner}
		if os.Getenv("WRENCH_BENCH_LOG") != "" {
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
		if mirror {
			cfg.MirrorDir = filepath.Join(base, "mirrors")
		}
		m, err := NewManager(cfg)
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	// settle flushes what an iteration wrote, so its writeback does not
	// slow the next one down.
	settle := func() { syscall.Sync() }
	open := func(b *testing.B, m *Manager) {
		w, err := m.Open(b.Context(), "bench", task.Repo{URL: repo}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		settle()
		b.StartTimer()
	}
	for _, cli := range []struct{ name, url string }{{"git_cli", repo}, {"git_cli_file_url", "file://" + repo}} {
		b.Run(cli.name, func(b *testing.B) {
			base := b.TempDir()
			for i := 0; b.Loop(); i++ {
				dst := filepath.Join(base, fmt.Sprint(i))
				runGit(b, "", "clone", "-q", cli.url, dst)
				b.StopTimer()
				os.RemoveAll(dst)
				settle()
				b.StartTimer()
			}
		})
	}
	// The file system's floor: copying a checked-out tree (without .git).
	b.Run("cp_tree", func(b *testing.B) {
		base := b.TempDir()
		tree := filepath.Join(base, "tree")
		runGit(b, "", "clone", "-q", repo, tree)
		must(b, os.RemoveAll(filepath.Join(tree, ".git")))
		for i := 0; b.Loop(); i++ {
			dst := filepath.Join(base, fmt.Sprint(i))
			if out, err := exec.Command("cp", "-a", tree, dst).CombinedOutput(); err != nil {
				b.Fatalf("cp: %v %s", err, out)
			}
			b.StopTimer()
			os.RemoveAll(dst)
			settle()
			b.StartTimer()
		}
	})
	b.Run("first", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			m := newManager(b, filepath.Join(b.TempDir(), fmt.Sprint(i)), true)
			settle()
			b.StartTimer()
			open(b, m)
		}
	})
	b.Run("mirror", func(b *testing.B) {
		m := newManager(b, b.TempDir(), true)
		open(b, m) // warm the mirror
		settle()
		for b.Loop() {
			open(b, m)
		}
	})
	b.Run("direct", func(b *testing.B) {
		m := newManager(b, b.TempDir(), false)
		for b.Loop() {
			open(b, m)
		}
	})
}
