package dispatcher

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// drainTimeout bounds how long events still queued when a run ends may take
// to publish.
const drainTimeout = 5 * time.Second

// eventBuffer is how many runner events may wait to be published before new
// ones are dropped (a slow or absent NATS must not stall the agent).
const eventBuffer = 512

// eventPump publishes a run's events in order, off the runner's goroutine,
// tracks its live progress and moves the state record between running and
// verifying on state events. The runner's result event goes to the
// observer only; the published one follows the stored final state.
type eventPump struct {
	f       *flight
	ctx     context.Context // the run's, for observer hooks
	pubCtx  context.Context // publishing; cancelled drainTimeout after close
	stopPub context.CancelFunc
	ch      chan task.Event
	wg      sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	dropped  int
	progress task.Progress
	dirty    bool
}

func (d *Dispatcher) newEventPump(ctx context.Context, f *flight) *eventPump {
	p := &eventPump{f: f, ctx: ctx, ch: make(chan task.Event, eventBuffer)}
	p.pubCtx, p.stopPub = context.WithCancel(context.WithoutCancel(ctx))
	p.wg.Go(p.loop)
	return p
}

// send is the onEvent callback handed to the Runner.
func (p *eventPump) send(ev task.Event) {
	ev.TaskID = p.f.t.ID
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	p.f.d.obs.TaskEvent(p.ctx, ev)
	if ev.Kind == task.EventResult {
		// The runner's result is not yet the task's: the dispatcher stores
		// the final state and then publishes the result event itself
		// (finish). Followers stop at the first result event, so one
		// published now would end them while the task is still running or
		// verifying, or before it is handed back for another attempt.
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.track(ev)
	select {
	case p.ch <- ev:
	default:
		p.dropped++
	}
}

// track folds ev into the live progress; p.mu is held.
func (p *eventPump) track(ev task.Event) {
	switch ev.Kind {
	case task.EventTurn:
		p.progress.Turn = ev.Turn
	case task.EventToolCall:
		p.progress.LastTool = ev.Tool
	case task.EventUsage:
		if u := ev.Usage; u != nil {
			p.progress.Tokens += u.InputTokens + u.OutputTokens
			p.progress.InputTokens += u.InputTokens
			p.progress.OutputTokens += u.OutputTokens
			p.progress.ModelCalls += u.ModelCalls
			p.progress.CostUSD += u.CostUSD
		}
	default:
		return
	}
	p.dirty = true
}

func (p *eventPump) takeProgress() (task.Progress, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ok := p.dirty
	p.dirty = false
	return p.progress, ok
}

// close stops accepting events and waits until the queued ones are out.
func (p *eventPump) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.ch)
	}
	dropped := p.dropped
	p.mu.Unlock()
	timer := time.AfterFunc(drainTimeout, p.stopPub)
	p.wg.Wait()
	timer.Stop()
	p.stopPub()
	if dropped > 0 {
		p.f.log().Warn("events dropped: publisher too slow", "dropped", dropped)
	}
}

func (p *eventPump) loop() {
	d := p.f.d
	for ev := range p.ch {
		if ev.Kind == task.EventState && (ev.State == task.StateVerifying || ev.State == task.StateRunning) {
			if lease := p.f.leaseOf(); lease != nil {
				ctx, cancel := context.WithTimeout(p.pubCtx, opTimeout)
				err := lease.Update(ctx, func(s *task.Status) { s.State = ev.State })
				cancel()
				if errors.Is(err, queue.ErrLostLease) {
					p.f.cancel(errLostLease)
				}
			}
		}
		d.emit(p.pubCtx, ev)
		if ev.Kind == task.EventUsage {
			p.f.flushProgress()
		}
	}
}
