package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// events streams a task's events as Server-Sent Events: each event is
// "id: <seq>", "event: <kind>", "data: <task.Event JSON>"; comments keep the
// connection alive; the stream ends after the result event. A client resumes
// with the Last-Event-ID header (or ?after=SEQ) and gets only later events.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	from, err := resumePoint(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid resume point",
			[]task.FieldError{{Field: "Last-Event-ID", Problem: err.Error()}})
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel() // stops the backend's follower
	ch, err := s.cfg.Events.Follow(ctx, id, from)
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	if rec, ok := w.(*recorder); ok {
		rec.stream = true
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's WriteTimeout
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // tell reverse proxies not to buffer
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprintf(w, ": events of %s\nretry: 2000\n\n", id); err != nil {
		return
	}
	_ = rc.Flush()

	beat := time.NewTicker(s.cfg.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-ch:
			if !ok {
				return
			}
			if err := writeEvent(w, ev); err != nil {
				return
			}
			if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
				return
			}
			if ev.Kind == task.EventResult {
				return
			}
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil {
				return
			}
			if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
				return
			}
		}
	}
}

func writeEvent(w http.ResponseWriter, ev task.Event) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	var b strings.Builder
	if ev.Seq > 0 {
		fmt.Fprintf(&b, "id: %d\n", ev.Seq)
	}
	fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", ev.Kind, data)
	_, err = fmt.Fprint(w, b.String())
	return err
}

// resumePoint is the sequence a stream resumes after: the Last-Event-ID
// header, else the "after" query parameter, else 0 (from the start).
func resumePoint(r *http.Request) (uint64, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an event id", v)
	}
	return n, nil
}
