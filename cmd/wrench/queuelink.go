package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/sandbox/reaper"
	"github.com/wrenchworks/wrench/task"
	"github.com/wrenchworks/wrench/telemetry"
	"github.com/wrenchworks/wrench/worker"
)

// queueLink is what a worker built before its queue connection learns once
// serve or worker has it: which tasks are final (the reaper removes their
// containers on sight), where removals are counted
// (wrench_orphans_reaped_total), where running tasks' save points go
// (the artifact store, worker.Resumes), and the budget ledger with the
// policy its budgets come from (budget.go). Until then, and in `wrench run`,
// it tells and keeps nothing. The zero value is ready to use; a nil one
// tells nothing.
type queueLink struct {
	mu        sync.Mutex
	states    *queue.States
	artifacts *queue.Artifacts
	metrics   *telemetry.Metrics
	reaper    *reaper.Reaper
	budget    budgetState
}

var _ worker.Resumes = (*queueLink)(nil)

func (h *queueLink) setReaper(r *reaper.Reaper) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.reaper = r
	h.mu.Unlock()
}

// connect gives the link the queue and the metrics, then sweeps once with
// them.
func (h *queueLink) connect(ctx context.Context, conn *queue.Conn, m *telemetry.Metrics, log *slog.Logger) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.states, h.artifacts, h.metrics = conn.States(), conn.Artifacts(), m
	h.budget.budgets = conn.Budgets()
	r := h.reaper
	h.mu.Unlock()
	if r == nil {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := r.Sweep(sctx); err != nil {
		log.Warn("reaper: sweep", "err", err)
	}
}

// final reports whether task id's state is final.
func (h *queueLink) final(ctx context.Context, id string) (bool, error) {
	if h == nil {
		return false, nil
	}
	h.mu.Lock()
	s := h.states
	h.mu.Unlock()
	if s == nil {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := s.Status(ctx, id)
	if err != nil {
		return false, err
	}
	return st.State.Final(), nil
}

// observe counts a removal.
func (h *queueLink) observe(r reaper.Removed) {
	if h == nil {
		return
	}
	h.mu.Lock()
	m := h.metrics
	h.mu.Unlock()
	if m != nil {
		m.OrphanReaped(r.Kind, r.Cause)
	}
}

// resumeArtifact is the artifact under which a running task's save point
// is kept.
const resumeArtifact = "resume.json"

// errNoQueue is returned before connect.
var errNoQueue = errors.New("no queue connection")

func (h *queueLink) store() *queue.Artifacts {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.artifacts
}

// SaveResume keeps task id's save point in the artifact store.
func (h *queueLink) SaveResume(ctx context.Context, id string, data []byte) error {
	a := h.store()
	if a == nil {
		return errNoQueue
	}
	_, err := a.Put(ctx, id, map[string][]byte{resumeArtifact: data})
	return err
}

// LoadResume returns task id's save point (nil when it has none).
func (h *queueLink) LoadResume(ctx context.Context, id string) ([]byte, error) {
	a := h.store()
	if a == nil {
		return nil, nil
	}
	b, err := a.Get(ctx, id, resumeArtifact)
	if errors.Is(err, task.ErrNotFound) {
		return nil, nil
	}
	return b, err
}

// resumesOf is h as the worker's Resumes; nil (no save points) for a
// worker without a queue (`wrench run`).
func resumesOf(h *queueLink) worker.Resumes {
	if h == nil {
		return nil
	}
	return h
}
