package api

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/wrenchworks/wrench/task"
)

// fakeBackend is an in-memory Submitter, States, EventSource and
// ArtifactSource.
type fakeBackend struct {
	mu        sync.Mutex
	tasks     map[string]task.Status
	events    map[string][]task.Event
	artifacts map[string][]byte
	changed   chan struct{} // closed and replaced on every append
	seq       uint64
	// breakAfter, when > 0, makes the next Events stream close after that
	// many events without a result (a dropped connection).
	breakAfter int
	// lastSpan is the span context the last call saw.
	lastSpan trace.SpanContext
	// failWith, when set, is returned by every call.
	failWith error
}

var (
	_ Submitter      = (*fakeBackend)(nil)
	_ States         = (*fakeBackend)(nil)
	_ EventSource    = (*fakeBackend)(nil)
	_ ArtifactSource = (*fakeBackend)(nil)
)

func newFake() *fakeBackend {
	return &fakeBackend{tasks: map[string]task.Status{}, events: map[string][]task.Event{},
		artifacts: map[string][]byte{}, changed: make(chan struct{})}
}

func (f *fakeBackend) Submit(ctx context.Context, t task.Task) (task.Status, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastSpan = trace.SpanContextFromContext(ctx)
	if f.failWith != nil {
		return task.Status{}, false, f.failWith
	}
	if err := t.Validate(); err != nil {
		return task.Status{}, false, err
	}
	if t.ID == "" {
		t.ID = task.NewID()
	}
	if st, ok := f.tasks[t.ID]; ok {
		return st, true, nil
	}
	now := time.Now().UTC()
	st := task.Status{TaskID: t.ID, State: task.StateQueued, Task: &t, CreatedAt: now, UpdatedAt: now}
	f.tasks[t.ID] = st
	return st, false, nil
}

func (f *fakeBackend) put(st task.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tasks[st.TaskID] = st
}

func (f *fakeBackend) Status(_ context.Context, id string) (task.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failWith != nil {
		return task.Status{}, f.failWith
	}
	st, ok := f.tasks[id]
	if !ok {
		return task.Status{}, fmt.Errorf("%w: %q", task.ErrNotFound, id)
	}
	return st, nil
}

func (f *fakeBackend) List(_ context.Context, o task.ListOptions) ([]task.Status, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failWith != nil {
		return nil, "", f.failWith
	}
	if o.Cursor == "bogus" {
		return nil, "", fmt.Errorf("list tasks: %w: %q", task.ErrBadCursor, o.Cursor)
	}
	var out []task.Status
	for _, st := range f.tasks {
		if o.State == "" || st.State == o.State {
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TaskID > out[j].TaskID })
	if o.Cursor != "" {
		for i, st := range out {
			if st.TaskID == o.Cursor {
				out = out[i+1:]
				break
			}
		}
	}
	if o.Limit > 0 && len(out) > o.Limit {
		out = out[:o.Limit]
		return out, out[len(out)-1].TaskID, nil
	}
	return out, "", nil
}

func (f *fakeBackend) Cancel(_ context.Context, id string) (task.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failWith != nil {
		return task.Status{}, f.failWith
	}
	st, ok := f.tasks[id]
	if !ok {
		return task.Status{}, fmt.Errorf("%w: %q", task.ErrNotFound, id)
	}
	if st.State == task.StateQueued {
		st.State = task.StateCancelled
		st.Result = &task.Result{TaskID: id, Status: task.StateCancelled}
		f.tasks[id] = st
	}
	return st, nil
}

func (f *fakeBackend) Resume(_ context.Context, id string) (task.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failWith != nil {
		return task.Status{}, f.failWith
	}
	st, ok := f.tasks[id]
	if !ok {
		return task.Status{}, fmt.Errorf("%w: %q", task.ErrNotFound, id)
	}
	if st.State != task.StatePaused {
		return st, fmt.Errorf("resume %s: %w", id, task.ErrNotPaused)
	}
	st.State, st.Pause = task.StateQueued, nil
	f.tasks[id] = st
	return st, nil
}

func (f *fakeBackend) Get(_ context.Context, id, name string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.artifacts[id+"/"+name]
	if !ok {
		return nil, fmt.Errorf("%w: artifact %s/%s", task.ErrNotFound, id, name)
	}
	return b, nil
}

// emit appends an event with the next sequence number.
func (f *fakeBackend) emit(ev task.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	ev.Seq = f.seq
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	f.events[ev.TaskID] = append(f.events[ev.TaskID], ev)
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeBackend) Follow(ctx context.Context, id string, fromSeq uint64) (<-chan task.Event, error) {
	f.mu.Lock()
	if f.failWith != nil {
		f.mu.Unlock()
		return nil, f.failWith
	}
	if _, ok := f.tasks[id]; !ok {
		f.mu.Unlock()
		return nil, fmt.Errorf("%w: %q", task.ErrNotFound, id)
	}
	breakAfter := f.breakAfter
	f.breakAfter = 0
	f.mu.Unlock()
	out := make(chan task.Event)
	go func() {
		defer close(out)
		sent := 0
		next := fromSeq
		for {
			f.mu.Lock()
			var pending []task.Event
			for _, ev := range f.events[id] {
				if ev.Seq > next {
					pending = append(pending, ev)
				}
			}
			changed := f.changed
			f.mu.Unlock()
			for _, ev := range pending {
				if breakAfter > 0 && sent == breakAfter {
					return
				}
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
				sent++
				next = ev.Seq
				if ev.Kind == task.EventResult {
					return
				}
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
