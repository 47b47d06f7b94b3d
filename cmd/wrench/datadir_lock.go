package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockFileName is the data dir's lock: the pid of the `wrench serve` that
// owns the data dir (or of the `wrench nats-server` that owns its store
// dir), locked with flock(2) while it runs.
const lockFileName = "wrench.lock"

// errDataDirLocked reports a data dir owned by another running serve.
var errDataDirLocked = errors.New("data dir in use")

// lockDataDir takes the exclusive lock on dir for this process's lifetime
// (release it with the returned func): two serves on one data dir would
// each see only their own tasks. The lock goes with the process, however it
// ends; a lock file left behind by a dead process is taken over.
func lockDataDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		holder := strings.TrimSpace(string(b))
		if _, perr := strconv.Atoi(holder); perr != nil {
			holder = "unknown"
		}
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is owned by wrench pid %s (lock %s); stop it or give another directory", errDataDirLocked, dir, holder, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() {
		_ = f.Truncate(0)
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}
