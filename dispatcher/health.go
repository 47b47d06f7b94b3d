package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Prober is implemented by a [Runner] that can tell whether this worker's
// own infrastructure (its sandbox engine, image, disk) is usable; the
// dispatcher uses it when Config.Probe is nil.
type Prober interface {
	Probe(ctx context.Context) error
}

// probeTimeout bounds one probe.
const probeTimeout = 10 * time.Second

// errNotStarted is why a dispatcher is unready before Run's first probe.
var errNotStarted = errors.New("dispatcher not started")

// health is whether this worker may take tasks: unready until it starts,
// and while its own infrastructure is unusable.
type health struct {
	mu    sync.Mutex
	fault error
	back  chan struct{} // closed when the worker is ready again
}

// start ends the not-started state with the first probe's verdict.
func (d *Dispatcher) start(ctx context.Context) {
	if err := d.probe(ctx); err != nil {
		d.setUnready(err)
		return
	}
	d.setReady()
}

// Ready reports nil while the dispatcher takes tasks, and the fault that
// stops it (its worker's engine, image or disk is unusable, or the queue's
// store takes no writes) while it does not; it probes again every Config.ProbeInterval and takes tasks again on
// its own once the probe passes.
func (d *Dispatcher) Ready() error {
	d.health.mu.Lock()
	defer d.health.mu.Unlock()
	if d.health.fault != nil {
		return fmt.Errorf("not taking tasks: %w", d.health.fault)
	}
	return nil
}

// setUnready stops fetching because of fault.
func (d *Dispatcher) setUnready(fault error) {
	d.health.mu.Lock()
	prev := d.health.fault
	was := prev == nil
	d.health.fault = fault
	if was {
		d.health.back = make(chan struct{})
	}
	d.health.mu.Unlock()
	if was || prev == errNotStarted {
		d.log.Error("worker unready: its own infrastructure or the queue's store is unusable; not taking tasks until a probe passes", "err", fault, "probe_every", d.cfg.ProbeInterval)
		d.obs.Readiness(false)
	}
}

// setReady resumes fetching.
func (d *Dispatcher) setReady() {
	d.health.mu.Lock()
	was := d.health.fault
	if was != nil {
		d.health.fault = nil
		close(d.health.back)
	}
	d.health.mu.Unlock()
	switch {
	case was == errNotStarted:
		d.obs.Readiness(true)
	case was != nil:
		d.log.Warn("worker ready again: its infrastructure passed the probe; taking tasks", "was", was)
		d.obs.Readiness(true)
	}
}

// waitReady returns once the dispatcher is ready, or ctx's cause.
func (d *Dispatcher) waitReady(ctx context.Context) error {
	for {
		d.health.mu.Lock()
		fault, back := d.health.fault, d.health.back
		d.health.mu.Unlock()
		if fault == nil {
			return nil
		}
		select {
		case <-back:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// probe runs Config.Probe and the queue's store probe (nil when there are
// none).
func (d *Dispatcher) probe(ctx context.Context) error {
	if d.cfg.Probe == nil && d.q.StoreReady == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	var errs []error
	if d.cfg.Probe != nil {
		errs = append(errs, d.cfg.Probe(ctx))
	}
	if d.q.StoreReady != nil {
		errs = append(errs, d.q.StoreReady(ctx))
	}
	err := errors.Join(errs...)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return err
}

// localFault probes this worker's infrastructure after a run that failed
// for the infrastructure's reasons; a failing probe makes the dispatcher
// unready and is returned: the failure was this worker's, not the task's.
func (d *Dispatcher) localFault(ctx context.Context) error {
	err := d.probe(ctx)
	if err == nil {
		return nil
	}
	d.setUnready(err)
	return err
}

// healthLoop probes every ProbeInterval while the dispatcher is unready,
// until ctx is done (run probes once before the first fetch).
func (d *Dispatcher) healthLoop(ctx context.Context) {
	if d.cfg.Probe == nil && d.q.StoreReady == nil {
		return
	}
	tick := time.NewTicker(d.cfg.ProbeInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if d.Ready() == nil {
			continue
		}
		err := d.probe(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			d.setReady()
		case !errors.Is(err, context.DeadlineExceeded):
			d.setUnready(err) // keep the latest fault
		}
	}
}
