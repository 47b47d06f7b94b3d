//go:build unix

package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// fileLock is an flock(2) lock on a file, shared between processes (two
// workers on one host share a mirror directory) and between goroutines
// (each lock is its own open file description).
type fileLock struct{ f *os.File }

// lockFile waits for the lock on path until ctx is done.
func lockFile(ctx context.Context, path string, exclusive bool) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	l := &fileLock{f: f}
	if err := l.set(ctx, exclusive); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// set takes (or converts the held lock to) a shared or exclusive lock.
func (l *fileLock) set(ctx context.Context, exclusive bool) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	delay := 5 * time.Millisecond
	for {
		err := syscall.Flock(int(l.f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return fmt.Errorf("lock %s: %w", l.f.Name(), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lock %s: %w", l.f.Name(), ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, 200*time.Millisecond)
	}
}

// unlock releases the lock.
func (l *fileLock) unlock() {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
}
