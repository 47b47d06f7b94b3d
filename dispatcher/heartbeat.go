package dispatcher

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// progressInterval is how often a running task's live progress is written
// to its state record (when it changed).
const progressInterval = time.Second

type heartbeat struct {
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

func (h *heartbeat) stop() {
	h.once.Do(func() {
		close(h.done)
		h.wg.Wait()
	})
}

// startHeartbeat keeps the delivery alive while it is handled: InProgress
// every AckWait/3, a lease check (which notices a takeover) and a look at
// the cancel request (a fallback for a missed watch update) at the same
// pace, and progress writes every progressInterval.
func (f *flight) startHeartbeat() *heartbeat {
	h := &heartbeat{done: make(chan struct{})}
	h.wg.Go(func() {
		d := f.d
		beat := time.NewTicker(d.cfg.AckWait / 3)
		defer beat.Stop()
		prog := time.NewTicker(progressInterval)
		defer prog.Stop()
		for {
			select {
			case <-h.done:
				return
			case <-prog.C:
				f.flushProgress()
			case <-beat.C:
				if err := f.msg.InProgress(); err != nil {
					d.log.Warn("heartbeat", "task", f.t.ID, "err", err)
				}
				lease := f.lease.Load()
				if lease == nil {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), d.cfg.AckWait/3)
				if err := lease.Touch(ctx); errors.Is(err, queue.ErrLostLease) {
					f.cancel(errLostLease)
				} else if err != nil {
					d.log.Warn("refresh task state", "task", f.t.ID, "err", err)
				}
				if ok, _ := d.conn.CancelRequested(ctx, f.t.ID); ok {
					f.cancel(errCancelled)
				}
				cancel()
			}
		}
	})
	return h
}

// flushProgress writes the run's latest progress when it changed.
func (f *flight) flushProgress() {
	pump, lease := f.events.Load(), f.lease.Load()
	if pump == nil || lease == nil {
		return
	}
	p, ok := pump.takeProgress()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	err := lease.Update(ctx, func(s *task.Status) { s.Progress = &p })
	if errors.Is(err, queue.ErrLostLease) {
		f.cancel(errLostLease)
	}
}
