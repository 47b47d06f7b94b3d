package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestLockDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	release, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockDataDir(dir)
	if !errors.Is(err, errDataDirLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lock: %v; want it refused naming pid %d", err, os.Getpid())
	}
	release()
	again, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again()
}

// A second `wrench serve` on a data dir that another one owns exits 2,
// naming the owner's pid; once the owner is gone (even SIGKILLed) the data
// dir can be served again.
func TestSecondServeOnDataDirExits2(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	first, _, _, _ := startServeProc(t, ctx, "--data-dir", dir, "--slots", "0")
	_, stderr, code := runWrench(t, ctx, nil, "serve", "--data-dir", dir, "--slots", "0", "--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0")
	if code != exitBadInput || !strings.Contains(stderr, "pid "+strconv.Itoa(first.cmd.Process.Pid)) {
		t.Fatalf("second serve: exit %d, stderr %q; want 2 naming pid %d", code, stderr, first.cmd.Process.Pid)
	}
	_ = first.cmd.Process.Signal(syscall.SIGKILL)
	<-first.done
	second, apiURL, _, _ := startServeProc(t, ctx, "--data-dir", dir, "--slots", "0")
	if apiURL == "" {
		t.Fatalf("serve after the owner died did not start: %s", second.out.String())
	}
}
