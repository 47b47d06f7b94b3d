package shim

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

// The shim shares the sandbox's pids limit with the commands it runs. A
// fork bomb that fills the limit would leave the Go runtime unable to
// create an OS thread, which aborts the process and takes the sandbox with
// it. Two defences keep it up:
//
//   - reserveThreads makes the runtime create a pool of OS threads at start.
//     The runtime never ends an idle thread, so later blocking system calls
//     reuse the pool instead of asking the kernel for a new thread.
//   - the pids guard watches the sandbox's pids cgroup and, when the limit
//     stays reached, kills the process groups of the commands running, so
//     the command returns (exit 137, a note in its output) and the sandbox
//     stays usable.
//
// A per-command RLIMIT_NPROC was rejected: the kernel counts it per user
// across the whole host, and every sandbox runs as the same uid, so one
// sandbox's bomb would make fork fail in every other sandbox.

// reserveThreads makes the runtime hold at least n idle OS threads: n
// goroutines lock their threads at the same time, then unlock and return,
// leaving the threads idle and reusable.
func reserveThreads(n int) {
	var locked, done sync.WaitGroup
	release := make(chan struct{})
	locked.Add(n)
	done.Add(n)
	for range n {
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			locked.Done()
			<-release
			runtime.UnlockOSThread() // the thread stays, idle
		}()
	}
	locked.Wait()
	close(release)
	done.Wait()
}

// reserveCount is how many threads to reserve: want, but at most a quarter of
// what the pids limit leaves (a sandbox with a tight limit still needs
// room for its commands, and a thread the limit refuses while reserving
// would abort the shim).
func reserveCount(want int, cg pidsCgroup) int {
	if want <= 0 || cg == "" {
		return max(want, 0)
	}
	s, err := cg.sample()
	if err != nil {
		return want
	}
	return int(min(int64(want), max(0, (s.limit-s.current)/4)))
}

// pidsCgroup is the directory of a pids cgroup controller's files.
type pidsCgroup string

// findPidsCgroup returns the sandbox's pids cgroup directory, or "" when
// none with a numeric limit is visible (a host process, an unlimited
// cgroup, a runtime without cgroupfs).
func findPidsCgroup() pidsCgroup {
	dirs := []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup"} // v1, v2 with a cgroup namespace
	if data, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if p, ok := strings.CutPrefix(line, "0::"); ok && p != "/" { // v2 without a cgroup namespace
				dirs = append(dirs, filepath.Join("/sys/fs/cgroup", p))
			}
		}
	}
	for _, d := range dirs {
		if _, err := pidsCgroup(d).limit(); err == nil {
			return pidsCgroup(d)
		}
	}
	return ""
}

// limit reads pids.max; an unlimited cgroup ("max") is an error.
func (c pidsCgroup) limit() (int64, error) {
	return readInt(filepath.Join(string(c), "pids.max"))
}

// sample reads how many tasks the cgroup holds and how many forks it has
// refused (the "max" line of pids.events; -1 when the kernel has no such
// file).
func (c pidsCgroup) sample() (pidsSample, error) {
	var s pidsSample
	var err error
	if s.limit, err = c.limit(); err != nil {
		return s, err
	}
	if s.current, err = readInt(filepath.Join(string(c), "pids.current")); err != nil {
		return s, err
	}
	s.refused = -1
	if data, err := os.ReadFile(filepath.Join(string(c), "pids.events")); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "max "); ok {
				if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
					s.refused = n
				}
			}
		}
	}
	return s, nil
}

func readInt(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// pidsSample is one reading of the pids cgroup.
type pidsSample struct {
	limit, current, refused int64
}

// pidsWatch decides from successive samples whether the limit has stayed
// reached for the sustain period: a sample is "at the limit" when the
// cgroup refused a fork since the previous sample or holds as many tasks
// as it may.
type pidsWatch struct {
	sustain     time.Duration
	lastRefused int64
	since       time.Time // start of the current run at the limit; zero when not at it
}

// observe takes a sample taken at now and reports whether the limit has
// been reached continuously for the sustain period. After it reports true
// the run starts over.
func (w *pidsWatch) observe(s pidsSample, now time.Time) bool {
	refusedMore := s.refused >= 0 && w.lastRefused >= 0 && s.refused > w.lastRefused
	w.lastRefused = s.refused
	if !refusedMore && s.current < s.limit {
		w.since = time.Time{}
		return false
	}
	if w.since.IsZero() {
		w.since = now
	}
	if now.Sub(w.since) < w.sustain {
		return false
	}
	w.since = time.Time{}
	return true
}

// guardPids samples the cgroup every interval while commands run and kills
// the running commands' process groups when the limit has stayed reached.
// It returns when ctx is done.
func (s *server) guardPids(ctx context.Context, cg pidsCgroup) {
	w := &pidsWatch{sustain: s.opts.PidsSustain, lastRefused: -1}
	tick := time.NewTicker(s.opts.PidsInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if !s.running() {
				w.lastRefused, w.since = -1, time.Time{}
				continue
			}
			sample, err := cg.sample()
			if err != nil {
				continue
			}
			if w.observe(sample, now) {
				s.killRunning(sample.limit)
			}
		}
	}
}

// execGroup is one running command's process group.
type execGroup struct {
	pgid int
	// pidsLimit is set (to the limit) when the pids guard killed it.
	pidsLimit int64
}

func (s *server) addGroup(g *execGroup) {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	s.groups[g] = struct{}{}
}

func (s *server) removeGroup(g *execGroup) {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	delete(s.groups, g)
}

func (s *server) running() bool {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	return len(s.groups) > 0
}

// killRunning kills every running command's process group, marking each
// so its result says why.
func (s *server) killRunning(limit int64) {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	for g := range s.groups {
		g.pidsLimit = limit
		syscall.Kill(-g.pgid, syscall.SIGKILL)
	}
}

// killedByGuard returns the pids limit when the guard killed g, else 0.
func (s *server) killedByGuard(g *execGroup) int64 {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	return g.pidsLimit
}

// pidsNote ends the output of a command the pids guard killed.
func pidsNote(limit int64, sustain time.Duration) string {
	return fmt.Sprintf("\n[wrench: the sandbox's process limit (%d) stayed reached for %s; the command's processes were killed]\n", limit, sustain)
}

// startFailure turns a command that could not be started for lack of
// processes into a result, so the caller sees a failed command rather than
// a broken sandbox.
func startFailure(err error) (sandbox.ExecResult, bool) {
	if !errors.Is(err, syscall.EAGAIN) {
		return sandbox.ExecResult{}, false
	}
	return sandbox.ExecResult{
		ExitCode: 126,
		Output:   []byte(fmt.Sprintf("[wrench: the command could not start: the sandbox's process limit is reached (%v)]\n", err)),
	}, true
}
