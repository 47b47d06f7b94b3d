package shim_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/shim"
)

// fakePids writes a pids cgroup directory with the given files.
func fakePids(t *testing.T, max, current string, events string) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range map[string]string{"pids.max": max, "pids.current": current, "pids.events": events} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// When the sandbox's pids limit stays reached, the running command's
// process group is killed and the command returns a result saying why.
func TestPidsGuardKillsRunningCommand(t *testing.T) {
	dir := t.TempDir()
	cg := fakePids(t, "128", "128", "max 0")
	c := startShim(t, dir, shim.Options{PidsCgroup: cg, PidsInterval: 10 * time.Millisecond, PidsSustain: 50 * time.Millisecond})
	res, err := c.Exec(context.Background(), sandbox.ExecRequest{Command: "sleep 100 & echo $! > pid; echo started; wait", Timeout: time.Minute}, nil)
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	out := string(res.Output)
	if res.TimedOut || res.ExitCode != 137 {
		t.Errorf("exit %d timed out %v, want 137 from the guard", res.ExitCode, res.TimedOut)
	}
	if !strings.HasPrefix(out, "started\n") || !strings.Contains(out, "process limit (128) stayed reached") {
		t.Errorf("output = %q, want the command's output and the guard's note", out)
	}
	waitGone(t, readPID(t, filepath.Join(dir, "pid")))
}

// Below the limit, with no refused forks, commands run to the end.
func TestPidsGuardLeavesCommandsBelowLimit(t *testing.T) {
	cg := fakePids(t, "128", "12", "max 3")
	c := startShim(t, t.TempDir(), shim.Options{PidsCgroup: cg, PidsInterval: 10 * time.Millisecond, PidsSustain: 20 * time.Millisecond})
	res, err := c.Exec(context.Background(), sandbox.ExecRequest{Command: "sleep 0.5; echo done"}, nil)
	if err != nil || res.ExitCode != 0 || string(res.Output) != "done\n" {
		t.Fatalf("Exec = %+v, %v", res, err)
	}
}

// The shim holds a pool of OS threads from the start, so it does not need
// a new one (which a full pids limit would refuse, aborting the runtime).
func TestServeReservesThreads(t *testing.T) {
	const reserve = 64
	c := startShim(t, t.TempDir(), shim.Options{ReserveThreads: reserve, PidsCgroup: "none"})
	if out, err := runExec(c, "echo ok"); err != nil || string(out) != "ok\n" {
		t.Fatalf("Exec = %q, %v", out, err)
	}
	if n := threads(t); n < reserve {
		t.Errorf("process has %d threads after Serve started, want at least the %d reserved", n, reserve)
	}
}

func threads(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// The command reaches the shell as written: bash's line numbers in error
// messages are the user's own.
func TestExecLineNumbersUnchanged(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("needs bash")
	}
	c := startShim(t, t.TempDir(), shim.Options{Shell: "/bin/bash"})
	res, err := c.Exec(context.Background(), sandbox.ExecRequest{Command: "true\n\nno_such_command_xyz"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "/bin/bash: line 3: no_such_command_xyz: command not found\n"; string(res.Output) != want || res.ExitCode != 127 {
		t.Errorf("exit %d output %q, want 127 %q", res.ExitCode, res.Output, want)
	}
}
