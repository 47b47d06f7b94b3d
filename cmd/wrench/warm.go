package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/pool"
	"github.com/wrenchworks/wrench/worker"
)

// startPool starts a warm pool of size sandboxes shaped like tmpl, with
// their workspace directories under dataDir/warm/<pid>. Directories that
// earlier, now dead, processes left there are removed first (their
// containers are the reaper's). stop closes the pool.
func startPool(prov sandbox.Provider, dataDir string, size int, tmpl sandbox.Spec, log *slog.Logger) (*pool.Pool, func(), error) {
	base := filepath.Join(dataDir, "warm")
	removeDeadPoolDirs(base, log)
	p, err := pool.New(prov, pool.Config{
		Size:     size,
		Template: tmpl,
		Dir:      filepath.Join(base, strconv.Itoa(os.Getpid())),
		Logger:   log,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("warm pool: %w", err)
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			log.Warn("close warm pool", "err", err)
		}
	}
	return p, stop, nil
}

// removeDeadPoolDirs removes base/<pid> directories whose process is gone.
func removeDeadPoolDirs(base string, log *slog.Logger) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(base, e.Name())); err != nil {
			log.Warn("remove a dead pool's directories", "dir", e.Name(), "err", err)
		}
	}
}

func processAlive(pid int) bool {
	_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
	return err == nil
}

// poolAdapter lets the worker use a pool.Pool.
type poolAdapter struct{ p *pool.Pool }

func (a poolAdapter) Acquire(ctx context.Context, spec sandbox.Spec) (worker.Lease, error) {
	l, err := a.p.Acquire(ctx, spec)
	if err != nil {
		return nil, err
	}
	return leaseAdapter{l}, nil
}

type leaseAdapter struct{ l *pool.Lease }

func (a leaseAdapter) Sandbox() sandbox.Sandbox          { return a.l.Sandbox }
func (a leaseAdapter) Dir() string                       { return a.l.WorkspaceDir }
func (a leaseAdapter) Release(ctx context.Context) error { return a.l.Release(ctx) }
