package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/wrenchworks/wrench/task"
)

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
	// Fields lists the fields at fault of an invalid request (400).
	Fields []task.FieldError `json:"fields,omitempty"`
	// TaskID names the task of a failed submission (503): submitting it
	// again with this id is safe.
	TaskID string `json:"task_id,omitempty"`
}

// Sentinels a [Client] error matches with errors.Is, by HTTP status.
var (
	// ErrInvalid is a 400: the request (usually the task) is invalid;
	// the *Error's Fields say which fields are at fault.
	ErrInvalid = errors.New("api: invalid request")
	// ErrUnauthorized is a 401: the token is missing or wrong.
	ErrUnauthorized = errors.New("api: unauthorized")
	// ErrForbidden is a 403: the server policy refuses the task's
	// repository.
	ErrForbidden = errors.New("api: forbidden")
	// ErrNotFound is a 404: no task has that id.
	ErrNotFound = errors.New("api: not found")
	// ErrConflict is a 409: the task is not in a state that allows the
	// request (e.g. no patch before it is final).
	ErrConflict = errors.New("api: conflict")
	// ErrTooLarge is a 413: the request body exceeds the server's limit.
	ErrTooLarge = errors.New("api: request body too large")
	// ErrUnavailable is a 503: the server cannot reach its task store
	// now; for a submission the *Error's TaskID says which id to submit
	// again.
	ErrUnavailable = errors.New("api: service unavailable")
)

// Error is a non-2xx answer from the server, as a [Client] reports it.
type Error struct {
	StatusCode int
	Message    string
	Fields     []task.FieldError
	// TaskID names the task of a failed submission.
	TaskID string
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.StatusCode)
	}
	s := fmt.Sprintf("server answered %d: %s", e.StatusCode, msg)
	for _, f := range e.Fields {
		s += fmt.Sprintf("\n  %s: %s", f.Field, f.Problem)
	}
	return s
}

// statusSentinels are the sentinels an *Error of each status code matches.
var statusSentinels = map[int]error{
	http.StatusBadRequest:            ErrInvalid,
	http.StatusUnauthorized:          ErrUnauthorized,
	http.StatusForbidden:             ErrForbidden,
	http.StatusNotFound:              ErrNotFound,
	http.StatusConflict:              ErrConflict,
	http.StatusRequestEntityTooLarge: ErrTooLarge,
	http.StatusServiceUnavailable:    ErrUnavailable,
}

// Is matches the sentinel of e's status code.
func (e *Error) Is(target error) bool {
	s, ok := statusSentinels[e.StatusCode]
	return ok && target == s
}
