package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/wrenchworks/wrench/task"
)

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge,
			fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit), nil)
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "read body: "+err.Error(), nil)
		return
	}
	t, err := task.Decode(body)
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	if t.Source.Kind == "" {
		t.Source.Kind = "api"
	}
	if err := t.Validate(); err != nil {
		s.backendError(w, r, err)
		return
	}
	if s.cfg.Admit != nil {
		if err := s.cfg.Admit(t); err != nil {
			var verr *task.ValidationError
			if errors.As(err, &verr) {
				writeError(w, http.StatusBadRequest, "the server policy does not allow this task", verr.Fields)
				return
			}
			writeError(w, http.StatusForbidden, err.Error(), nil)
			return
		}
	}
	if !s.assignTenant(w, r, &t) {
		return
	}
	st, dup, err := s.cfg.Submitter.Submit(r.Context(), t)
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	if rec, ok := w.(*recorder); ok {
		rec.taskID = st.TaskID
	}
	w.Header().Set("Location", "/v1/tasks/"+st.TaskID)
	code := http.StatusCreated
	if dup {
		code = http.StatusOK
	}
	writeJSON(w, code, st)
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	st, err := s.cfg.States.Status(r.Context(), r.PathValue("id"))
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// ListResponse is the body of GET /v1/tasks.
type ListResponse struct {
	Tasks []task.Status `json:"tasks"`
	// NextCursor continues the listing ("" on the last page).
	NextCursor string `json:"next_cursor,omitempty"`
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var o task.ListOptions
	var bad []task.FieldError
	if v := q.Get("state"); v != "" {
		o.State = task.State(v)
		if !o.State.Valid() {
			bad = append(bad, task.FieldError{Field: "state", Problem: fmt.Sprintf("%q is not a task state", v)})
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > task.MaxListLimit {
			bad = append(bad, task.FieldError{Field: "limit", Problem: fmt.Sprintf("must be 1..%d", task.MaxListLimit)})
		}
		o.Limit = n
	}
	o.Cursor = q.Get("cursor")
	if len(bad) > 0 {
		writeError(w, http.StatusBadRequest, "invalid query", bad)
		return
	}
	tasks, next, err := s.cfg.States.List(r.Context(), o)
	if err != nil {
		if errors.Is(err, task.ErrBadCursor) {
			writeError(w, http.StatusBadRequest, "invalid query",
				[]task.FieldError{{Field: "cursor", Problem: "is not a cursor this server issued"}})
			return
		}
		s.backendError(w, r, err)
		return
	}
	if tasks == nil {
		tasks = []task.Status{}
	}
	writeJSON(w, http.StatusOK, ListResponse{Tasks: tasks, NextCursor: next})
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	st, err := s.cfg.Submitter.Cancel(r.Context(), r.PathValue("id"))
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	code := http.StatusOK
	if !st.State.Final() {
		// Requested: the worker running it writes the cancelled result.
		code = http.StatusAccepted
	}
	writeJSON(w, code, st)
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, err := s.cfg.Submitter.Resume(r.Context(), id)
	if errors.Is(err, task.ErrNotPaused) {
		writeError(w, http.StatusConflict, fmt.Sprintf("task %s is %s: only a paused task can be resumed", id, st.State), nil)
		return
	}
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, err := s.cfg.States.Status(r.Context(), id)
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	if !st.State.Final() && st.State != task.StatePaused {
		writeError(w, http.StatusConflict, fmt.Sprintf("task %s is %s: no patch before it is final (or paused)", id, st.State), nil)
		return
	}
	var patch []byte
	if st.Result != nil {
		patch = []byte(st.Result.Patch)
	}
	if a := s.cfg.Artifacts; a != nil && len(patch) == 0 {
		b, err := a.Get(r.Context(), id, PatchArtifact)
		if err != nil && !errors.Is(err, task.ErrNotFound) {
			s.backendError(w, r, err)
			return
		}
		patch = b
	}
	if len(patch) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "text/x-diff; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(patch)))
	_, _ = w.Write(patch)
}

// backendError answers err: 400 for a validation error, 404 for an unknown
// id, 503 when the backend is unreachable, 500 otherwise.
func (s *Server) backendError(w http.ResponseWriter, r *http.Request, err error) {
	var verr *task.ValidationError
	var serr *task.SubmitError
	switch {
	case errors.As(err, &serr):
		s.log.WarnContext(r.Context(), "submission failed", "task_id", serr.TaskID, "err", err)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, ErrorBody{Error: submitFailure(serr), TaskID: serr.TaskID})
	case errors.As(err, &verr):
		writeError(w, http.StatusBadRequest, "invalid task", verr.Fields)
	case errors.Is(err, task.ErrNotFound):
		msg := "not found"
		if id := r.PathValue("id"); id != "" {
			msg = "no task " + id
		}
		writeError(w, http.StatusNotFound, msg, nil)
	case errors.Is(err, context.DeadlineExceeded):
		s.log.WarnContext(r.Context(), "backend timeout", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusServiceUnavailable, "the task store did not answer in time", nil)
	default:
		s.log.ErrorContext(r.Context(), "backend error", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error", nil)
	}
}

// submitFailure says what a failed submission left behind, and how to
// retry it safely.
func submitFailure(e *task.SubmitError) string {
	if errors.Is(e, task.ErrUnconfirmed) {
		return fmt.Sprintf("task %s: the task store did not confirm the submission in time; it may be queued. "+
			"Submit it again with id %q: a task is queued at most once per id", e.TaskID, e.TaskID)
	}
	return fmt.Sprintf("task %s was not queued: the task store is unavailable; nothing was stored, submit it again", e.TaskID)
}

// assignTenant sets the task's tenant as the server decides (Config.Tenant)
// and refuses a task that named another: it answers 400 and returns false.
func (s *Server) assignTenant(w http.ResponseWriter, r *http.Request, t *task.Task) bool {
	tenant := task.DefaultTenant
	if s.cfg.Tenant != nil {
		tok, _ := bearer(r.Header.Get("Authorization"))
		tenant = s.cfg.Tenant(s.tokenTenant(tok), *t)
	}
	if t.Tenant != "" && t.Tenant != tenant {
		writeError(w, http.StatusBadRequest, "the server assigns the tenant", []task.FieldError{{Field: "tenant",
			Problem: fmt.Sprintf("%q is not this request's tenant (%s): the server assigns it from the API token and the repository; leave it out", t.Tenant, tenant)}})
		return false
	}
	t.Tenant = tenant
	return true
}
