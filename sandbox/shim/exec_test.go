package shim_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/shim"
)

func runExec(c *shim.Client, cmd string) ([]byte, error) {
	res, err := c.Exec(context.Background(), sandbox.ExecRequest{Command: cmd}, nil)
	return res.Output, err
}

func TestExec(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := startShim(t, dir, shim.Options{})
	tests := []struct {
		name     string
		req      sandbox.ExecRequest
		env      map[string]string
		wantOut  string
		wantExit int
	}{
		{name: "stdout", req: sandbox.ExecRequest{Command: "echo hi"}, wantOut: "hi\n"},
		{name: "exit code", req: sandbox.ExecRequest{Command: "echo x; exit 3"}, wantOut: "x\n", wantExit: 3},
		{name: "stderr interleaved in order", req: sandbox.ExecRequest{Command: "echo a; echo b >&2; echo c"}, wantOut: "a\nb\nc\n"},
		{name: "signalled", req: sandbox.ExecRequest{Command: "kill -9 $$"}, wantExit: 137},
		{name: "dir", req: sandbox.ExecRequest{Command: "pwd", Dir: "sub"}, wantOut: filepath.Join(dir, "sub") + "\n"},
		{name: "absolute dir", req: sandbox.ExecRequest{Command: "pwd", Dir: filepath.Join(dir, "sub")}, wantOut: filepath.Join(dir, "sub") + "\n"},
		{name: "default dir", req: sandbox.ExecRequest{Command: "pwd"}, wantOut: dir + "\n"},
		{name: "stdin", req: sandbox.ExecRequest{Command: "cat", Stdin: []byte("in\n")}, wantOut: "in\n"},
		{name: "no stdin", req: sandbox.ExecRequest{Command: "cat"}, wantOut: ""},
		{name: "env", req: sandbox.ExecRequest{Command: "env | grep -v '^PWD=\\|^SHLVL=\\|^_=\\|^OLDPWD=' | sort"}, env: map[string]string{"TASK": "t1"},
			wantOut: "BASE=1\nPATH=" + os.Getenv("PATH") + "\nTASK=t1\n"},
		{name: "env overrides base", req: sandbox.ExecRequest{Command: "echo $BASE"}, env: map[string]string{"BASE": "2"}, wantOut: "2\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := c.Exec(context.Background(), tt.req, tt.env)
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			if string(res.Output) != tt.wantOut || res.ExitCode != tt.wantExit {
				t.Errorf("got exit %d output %q, want exit %d output %q", res.ExitCode, res.Output, tt.wantExit, tt.wantOut)
			}
			if res.TimedOut || res.Dropped != 0 || res.Duration <= 0 {
				t.Errorf("timedOut=%v dropped=%d duration=%v", res.TimedOut, res.Dropped, res.Duration)
			}
		})
	}
}

func TestExecBadDir(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), nil, 0o644)
	c := startShim(t, dir, shim.Options{})
	for _, tt := range []struct {
		dir  string
		want error
	}{
		{"..", sandbox.ErrEscape},
		{"/etc", sandbox.ErrEscape},
		{"missing", os.ErrNotExist},
		{"f", os.ErrInvalid},
	} {
		_, err := c.Exec(context.Background(), sandbox.ExecRequest{Command: "true", Dir: tt.dir}, nil)
		if !errors.Is(err, tt.want) {
			t.Errorf("Exec in %q = %v, want %v", tt.dir, err, tt.want)
		}
	}
}

func TestExecBinaryRoundTrip(t *testing.T) {
	c := startShim(t, t.TempDir(), shim.Options{})
	var in []byte
	for i := range 3 * 256 {
		in = append(in, byte(i))
	}
	in = append(in, 0xff, 0xfe, 0xc3, 0x28) // invalid UTF-8
	res, err := c.Exec(context.Background(), sandbox.ExecRequest{Command: "cat", Stdin: in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Output, in) {
		t.Fatalf("output differs from input: got %d bytes, want %d", len(res.Output), len(in))
	}
}

func TestExecOutputCap(t *testing.T) {
	c := startShim(t, t.TempDir(), shim.Options{})
	var full strings.Builder
	for i := 1; i <= 5000; i++ {
		full.WriteString(strconv.Itoa(i) + "\n")
	}
	want := full.String()
	res, err := c.Exec(context.Background(), sandbox.ExecRequest{Command: "seq 1 5000", MaxOutput: 101}, nil)
	if err != nil {
		t.Fatal(err)
	}
	head, tail := want[:51], want[len(want)-50:]
	if string(res.Output) != head+tail {
		t.Errorf("output = %q, want head %q + tail %q", res.Output, head, tail)
	}
	if res.Dropped != int64(len(want)-101) {
		t.Errorf("dropped = %d, want %d", res.Dropped, len(want)-101)
	}
}

func TestExecTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	c := startShim(t, dir, shim.Options{KillGrace: 100 * time.Millisecond})
	tests := []struct {
		name, cmd string
	}{
		{"background child", "sleep 100 & echo $! > pid; echo started; wait"},
		{"ignores SIGTERM", "trap '' TERM; sh -c 'trap \"\" TERM; echo $$ > pid; sleep 100; sleep 100'; echo never"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(filepath.Join(dir, "pid"))
			res, err := c.Exec(context.Background(), sandbox.ExecRequest{Command: tt.cmd, Timeout: 500 * time.Millisecond}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !res.TimedOut {
				t.Errorf("TimedOut = false, output %q", res.Output)
			}
			if strings.Contains(string(res.Output), "never") {
				t.Errorf("command went on after the timeout: %q", res.Output)
			}
			waitGone(t, readPID(t, filepath.Join(dir, "pid")))
		})
	}
}

// A process left running in the background must not hold the call open,
// and is killed when the shell exits.
func TestExecStragglers(t *testing.T) {
	dir := t.TempDir()
	c := startShim(t, dir, shim.Options{DrainGrace: 100 * time.Millisecond})

	res, err := c.Exec(context.Background(), sandbox.ExecRequest{Command: "sleep 100 & echo $! > pid; echo done", Timeout: time.Minute}, nil)
	if err != nil || res.TimedOut || string(res.Output) != "done\n" {
		t.Fatalf("Exec = %+v, %v", res, err)
	}
	waitGone(t, readPID(t, filepath.Join(dir, "pid")))

	// setsid leaves the group but keeps the output pipe open.
	res, err = c.Exec(context.Background(), sandbox.ExecRequest{Command: "setsid sh -c 'echo $$ > pid2; exec sleep 100' & until [ -s pid2 ]; do sleep 0.01; done; echo done", Timeout: time.Minute}, nil)
	if err != nil || res.TimedOut || string(res.Output) != "done\n" {
		t.Fatalf("Exec with escaped straggler = %+v, %v", res, err)
	}
	if pid := readPID(t, filepath.Join(dir, "pid2")); pid > 0 {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

func TestExecCancel(t *testing.T) {
	dir := t.TempDir()
	c := startShim(t, dir, shim.Options{KillGrace: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, sandbox.ExecRequest{Command: "echo $$ > pid; sleep 100"}, nil)
		errc <- err
	}()
	pid := readPID(t, filepath.Join(dir, "pid"))
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Exec = %v, want context.Canceled", err)
	}
	waitGone(t, pid)
	// The stream is still usable.
	if out, err := runExec(c, "echo ok"); err != nil || string(out) != "ok\n" {
		t.Fatalf("Exec after cancel = %q, %v", out, err)
	}
}
