package environment_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/egress"
	"github.com/wrenchworks/wrench/environment"
	"github.com/wrenchworks/wrench/internal/genrepo"
	"github.com/wrenchworks/wrench/internal/workertest"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker/dockertest"
	"github.com/wrenchworks/wrench/task"
)

// BenchmarkTaskStart times a task's way from accepted to a ready sandbox
// with the tree at the task's commit, on the generated 5,000-file
// repository (internal/genrepo; WRENCH_BENCH_REPO keeps it across runs):
//
//   - clone_start, the path without environments: a clone into a host
//     directory from a warm mirror, then a sandbox started on it;
//   - snapshot_hit: the commit resolved, the repository's .wrench.yaml
//     read, and a sandbox started from the environment's snapshot (built
//     one commit earlier), the task's commit sent in and checked out.
//
// Each reports its median as s/median; the target is snapshot_hit ≤ 0.5 s.
//
//	go test ./environment -run '^$' -bench TaskStart -benchtime 5x
func BenchmarkTaskStart(b *testing.B) {
	r := newRig(b)
	benchRepoInto(b, r.repo)
	r.write(".wrench.yaml", "setup:\n  - mkdir -p \"$HOME/deps\" && echo installed > \"$HOME/deps/marker\"\n")
	r.commit("environment")
	p, _, err := r.prepare("bench-build", nil)
	if err != nil {
		b.Fatal(err)
	}
	p.Close(context.Background())
	// The task's commit is one the snapshot does not hold.
	r.write("pkg00/sub00/file0000.txt", "changed by the task's commit\n")
	r.commit("task commit")
	ctx := context.Background()

	b.Run("clone_start", func(b *testing.B) {
		var times []time.Duration
		for i := 0; b.Loop(); i++ {
			start := time.Now()
			w, err := r.m.Open(ctx, fmt.Sprintf("bench-clone-%d", i), task.Repo{URL: r.repo, Ref: "main"}, nil)
			if err != nil {
				b.Fatal(err)
			}
			sb, err := r.p.Start(ctx, sandbox.Spec{Image: dockertest.DefaultImage, TaskID: "bench-clone", WorkspaceDir: w.Dir(), Timeout: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			times = append(times, time.Since(start))
			b.StopTimer()
			sb.Close(ctx)
			w.Close()
			b.StartTimer()
		}
		reportMedian(b, times)
	})
	b.Run("snapshot_hit", func(b *testing.B) {
		var times []time.Duration
		for i := 0; b.Loop(); i++ {
			start := time.Now()
			p, _, err := r.prepare(fmt.Sprintf("bench-hit-%d", i), nil)
			if err != nil {
				b.Fatal(err)
			}
			times = append(times, time.Since(start))
			b.StopTimer()
			if p.Setup.Snapshot != task.SnapshotHit {
				b.Fatalf("not a snapshot hit: %+v", p.Setup)
			}
			if got := benchExec(b, p.Sandbox, "cat $HOME/deps/marker; head -c 28 pkg00/sub00/file0000.txt"); got != "installed\nchanged by the task's commit" {
				b.Fatalf("sandbox not at the task's commit with its environment: %q", got)
			}
			p.Close(ctx)
			b.StartTimer()
		}
		reportMedian(b, times)
	})
}

// BenchmarkGoTestOnSnapshot times `go test ./...` of spf13/cast (a module
// with a dependency, ../shared/realrepos) in a sandbox started from its
// environment's snapshot: the first run there (hit_first) against a
// second run in the same sandbox (warm_second, every cache warm); the
// target is hit_first ≤ 1.5 × warm_second. cold_setup times the cold path
// up to a ready sandbox: a snapshot miss whose default setup downloads the
// modules through the egress proxy from the real Go module proxy, and
// warms the build cache.
//
//	go test ./environment -run '^$' -bench GoTestOnSnapshot -benchtime 3x
func BenchmarkGoTestOnSnapshot(b *testing.B) {
	bundle := filepath.Join("..", "..", "shared", "realrepos", "spf13-cast.bundle")
	if _, err := os.Stat(bundle); err != nil {
		b.Skipf("%s is not here: %v", bundle, err)
	}
	r := newRig(b, func(c *environment.Config) {
		c.Egress = &egress.Sessions{Dir: filepath.Join(b.TempDir(), "eg"), CABundle: workertest.HostCABundle()}
	})
	if err := os.Remove(r.repo); err != nil {
		b.Fatal(err)
	}
	genrepo.Git(b, "", "clone", "-q", bundle, r.repo)
	genrepo.Git(b, r.repo, "checkout", "-q", "-B", "main")
	ctx := context.Background()
	const goTest = "go test -count=1 ./..."

	b.Run("cold_setup", func(b *testing.B) {
		var times []time.Duration
		for i := 0; b.Loop(); i++ {
			r.extraEnv = map[string]string{"WRENCH_BENCH_MISS": fmt.Sprint(time.Now().UnixNano())} // a new key: a miss
			start := time.Now()
			p, _, err := r.prepare(fmt.Sprintf("bench-cold-%d", i), nil)
			if err != nil {
				b.Fatal(err)
			}
			times = append(times, time.Since(start))
			b.StopTimer()
			if p.Setup.Snapshot != task.SnapshotMiss || !p.Setup.Passed {
				b.Fatalf("not a passing miss: %+v", p.Setup)
			}
			p.Close(ctx)
			b.StartTimer()
		}
		reportMedian(b, times)
	})
	for _, runs := range []struct {
		name  string
		timed int // which run of go test is timed
	}{{"hit_first", 1}, {"warm_second", 2}} {
		b.Run(runs.name, func(b *testing.B) {
			var times []time.Duration
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				p, _, err := r.prepare(fmt.Sprintf("bench-%s-%d", runs.name, i), nil)
				if err != nil {
					b.Fatal(err)
				}
				if p.Setup.Snapshot != task.SnapshotHit {
					b.Fatalf("not a snapshot hit: %+v", p.Setup)
				}
				for run := 1; run <= runs.timed; run++ {
					if run == runs.timed {
						b.StartTimer()
					}
					start := time.Now()
					benchExec(b, p.Sandbox, goTest)
					if run == runs.timed {
						b.StopTimer()
						times = append(times, time.Since(start))
					}
				}
				p.Close(ctx)
			}
			reportMedian(b, times)
		})
	}
}

// benchRepoInto puts the generated benchmark repository at dir (an empty
// directory): generated there, or cloned from WRENCH_BENCH_REPO (generated
// there first when missing).
func benchRepoInto(b *testing.B, dir string) {
	b.Helper()
	src := os.Getenv("WRENCH_BENCH_REPO")
	if src == "" {
		genrepo.Generate(b, dir, genrepo.Bench)
		return
	}
	if _, err := os.Stat(filepath.Join(src, ".git")); err != nil {
		genrepo.Generate(b, src, genrepo.Bench)
	}
	if err := os.Remove(dir); err != nil {
		b.Fatal(err)
	}
	genrepo.Git(b, "", "clone", "-q", src, dir)
}

// benchExec runs a command that must succeed and returns its output.
func benchExec(b *testing.B, sb sandbox.Sandbox, cmd string) string {
	b.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: cmd, Timeout: 5 * time.Minute})
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("%s: %v exit %d\n%s", cmd, err, res.ExitCode, res.Output)
	}
	return strings.TrimSpace(string(res.Output))
}

// reportMedian reports the median of times as s/median.
func reportMedian(b *testing.B, times []time.Duration) {
	if len(times) == 0 {
		return
	}
	slices.Sort(times)
	b.ReportMetric(times[len(times)/2].Seconds(), "s/median")
}
