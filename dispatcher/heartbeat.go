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
// to its state record (when it changed); every other tick the cancel request
// key is read too, a fallback for a request whose message this worker missed
// (it was disconnected), so a cancellation reaches the run within about 2s.
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
// and a lease check (which notices a takeover) every AckWait/3; progress
// writes and the cancel-request fallback every progressInterval.
func (f *flight) startHeartbeat() *heartbeat {
	h := &heartbeat{done: make(chan struct{})}
	h.wg.Go(func() {
		d := f.d
		beat := time.NewTicker(d.cfg.AckWait / 3)
		defer beat.Stop()
		prog := time.NewTicker(progressInterval)
		defer prog.Stop()
		ticks := 0
		for {
			select {
			case <-h.done:
				return
			case <-prog.C:
				f.flushProgress()
				if ticks++; ticks%2 == 0 && f.leaseOf() != nil {
					ctx, cancel := context.WithTimeout(context.Background(), progressInterval)
					if ok, _ := d.q.States.CancelRequested(ctx, f.t.ID); ok {
						f.cancel(errCancelled)
					}
					cancel()
				}
			case <-beat.C:
				if err := f.dl.InProgress(); err != nil {
					f.log().Warn("heartbeat", "err", err)
				}
				rctx, rcancel := context.WithTimeout(context.Background(), d.cfg.AckWait/3)
				f.renewLimits(rctx)
				rcancel()
				lease := f.leaseOf()
				if lease == nil {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), d.cfg.AckWait/3)
				if err := lease.Touch(ctx); errors.Is(err, queue.ErrLostLease) {
					f.cancel(errLostLease)
				} else if err != nil {
					f.log().Warn("refresh task state", "err", err)
				}
				cancel()
			}
		}
	})
	return h
}

// flushProgress writes the run's latest progress when it changed: every
// progressInterval, and after each model call (what an attempt spent must
// be on record should its worker die: a later attempt counts it).
func (f *flight) flushProgress() {
	pump, lease := f.events.Load(), f.leaseOf()
	if pump == nil || lease == nil {
		return
	}
	f.flushMu.Lock() // snapshots are written in the order they are taken
	defer f.flushMu.Unlock()
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
