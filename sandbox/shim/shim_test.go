package shim_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/sandbox/shim"
)

// pipeConn is the client's end of two in-memory pipes.
type pipeConn struct {
	io.Reader
	io.Writer
	closers []io.Closer
}

func (p *pipeConn) Close() error {
	for _, c := range p.closers {
		c.Close()
	}
	return nil
}

// startShim serves dir on in-memory pipes and returns a ready client. The
// cleanup closes the client and checks that Serve returned nil.
func startShim(t *testing.T, dir string, opts shim.Options) *shim.Client {
	t.Helper()
	reqR, reqW := io.Pipe()
	respR, respW := io.Pipe()
	opts.WorkDir = dir
	if opts.Env == nil {
		opts.Env = []string{"PATH=" + os.Getenv("PATH"), "BASE=1"}
	}
	served := make(chan error, 1)
	go func() {
		err := shim.Serve(context.Background(), reqR, respW, opts)
		respW.Close()
		served <- err
	}()
	c := shim.NewClient(&pipeConn{Reader: respR, Writer: reqW, closers: []io.Closer{reqW, respR}})
	t.Cleanup(func() {
		c.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	hello, err := c.Ready(context.Background())
	if err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if hello.WorkDir != dir || hello.Version != shim.ProtocolVersion {
		t.Fatalf("hello = %+v", hello)
	}
	return c
}

// waitGone waits until pid no longer runs (absent or a zombie).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	t.Errorf("process %d still running", pid)
}

func readPID(t *testing.T, file string) int {
	t.Helper()
	var data []byte
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		data, _ = os.ReadFile(file)
		if len(data) > 0 && data[len(data)-1] == '\n' {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("pid file %s: %q", file, data)
	}
	return pid
}

func TestServeEndsOnEOF(t *testing.T) {
	dir := t.TempDir()
	reqR, reqW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- shim.Serve(context.Background(), reqR, io.Discard, shim.Options{WorkDir: dir}) }()
	reqW.Close()
	if err := <-done; err != nil {
		t.Fatalf("Serve after EOF = %v, want nil", err)
	}
}

func TestServeMissingWorkDir(t *testing.T) {
	err := shim.Serve(context.Background(), strings.NewReader(""), io.Discard, shim.Options{WorkDir: filepath.Join(t.TempDir(), "nope")})
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Serve = %v, want not exist", err)
	}
}

func TestClientAfterClose(t *testing.T) {
	c := startShim(t, t.TempDir(), shim.Options{})
	c.Close()
	if err := c.Ping(context.Background()); !errors.Is(err, shim.ErrClosed) {
		t.Fatalf("Ping after Close = %v, want ErrClosed", err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	c := startShim(t, t.TempDir(), shim.Options{})
	errs := make(chan error, 20)
	for i := range 20 {
		go func() {
			want := "n" + strconv.Itoa(i)
			res, err := runExec(c, "sleep 0.05; echo "+want)
			if err == nil && string(res) != want+"\n" {
				err = errors.New("got " + string(res) + " want " + want)
			}
			errs <- err
		}()
	}
	for range 20 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
