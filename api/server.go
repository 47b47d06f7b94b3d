package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// Backend is what the API needs of the task queue; *queue.Conn implements
// it. Errors wrapping queue.ErrNotFound answer 404 and errors wrapping a
// *task.ValidationError answer 400.
type Backend interface {
	// Submit queues t; duplicate is true (and st the existing status) when
	// a task with t's ID is already known.
	Submit(ctx context.Context, t task.Task) (st task.Status, duplicate bool, err error)
	Status(ctx context.Context, id string) (task.Status, error)
	// List returns a page of tasks, newest first, and the next cursor.
	List(ctx context.Context, o queue.ListOptions) ([]task.Status, string, error)
	Cancel(ctx context.Context, id string) (task.Status, error)
	// Events streams the events of task id after fromSeq, closing the
	// channel after the result event or when ctx is done.
	Events(ctx context.Context, id string, fromSeq uint64) (<-chan task.Event, error)
}

var (
	_ Backend   = (*queue.Conn)(nil)
	_ Artifacts = (*queue.Conn)(nil)
)

// Artifacts is the optional ability of a [Backend] to return a stored
// artifact; the patch endpoint uses it when a result's Patch is not inline.
type Artifacts interface {
	Artifact(ctx context.Context, id, name string) ([]byte, error)
}

// PatchArtifact is the artifact name of a task's patch.
const PatchArtifact = "patch.diff"

// DefaultMaxBody is the request body limit when Config.MaxBody is zero.
const DefaultMaxBody = 1 << 20

// Config configures a [Server].
type Config struct {
	// Backend is required.
	Backend Backend
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// every /v1/ request. /healthz, /readyz and /metrics are open.
	Token string
	// MaxBody caps request bodies (DefaultMaxBody when zero); larger
	// bodies answer 413.
	MaxBody int64
	// Logger receives one line per request; nil discards.
	Logger *slog.Logger
	// Metrics, when set, is served at GET /metrics.
	Metrics http.Handler
	// Ready reports readiness for GET /readyz; nil means always ready.
	Ready func(ctx context.Context) error
	// Heartbeat is the interval of SSE keep-alive comments (15s when zero).
	Heartbeat time.Duration
	// TracerProvider, when set, gives each request a server span (a child
	// of the caller's traceparent), whose context reaches the queue so the
	// task's trace starts at the request.
	TracerProvider trace.TracerProvider
	// Propagator reads the caller's trace context (W3C trace context when
	// nil).
	Propagator propagation.TextMapPropagator
	// ObserveRequest, when set, is called once per request with the route
	// pattern, status code, duration and whether it was an event stream
	// (telemetry.Metrics.HTTPRequest fits).
	ObserveRequest func(route string, code int, d time.Duration, stream bool)
}

// Server is Wrench's HTTP API. It is an http.Handler; serve it with an
// http.Server whose WriteTimeout is zero or long (event streams clear their
// own write deadline).
type Server struct {
	cfg    Config
	log    *slog.Logger
	mux    *http.ServeMux
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	token  [32]byte
}

// NewServer checks cfg and returns a Server.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("api: Backend is required")
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), prop: cfg.Propagator}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	s.tracer = tp.Tracer("github.com/wrenchworks/wrench/api")
	if s.prop == nil {
		s.prop = propagation.TraceContext{}
	}
	s.token = sha256.Sum256([]byte(cfg.Token))

	s.mux.HandleFunc("POST /v1/tasks", s.auth(s.submit))
	s.mux.HandleFunc("GET /v1/tasks", s.auth(s.list))
	s.mux.HandleFunc("GET /v1/tasks/{id}", s.auth(s.status))
	s.mux.HandleFunc("GET /v1/tasks/{id}/events", s.auth(s.events))
	s.mux.HandleFunc("GET /v1/tasks/{id}/patch", s.auth(s.patch))
	s.mux.HandleFunc("POST /v1/tasks/{id}/cancel", s.auth(s.cancel))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	s.mux.HandleFunc("GET /readyz", s.ready)
	if cfg.Metrics != nil {
		s.mux.Handle("GET /metrics", cfg.Metrics)
	}
	s.mux.HandleFunc("/", s.noRoute)
	return s, nil
}

// Handle mounts another handler on the server's mux (e.g. the GitHub
// webhook at "POST /webhooks/github"), outside the bearer-token check: h
// authenticates its own requests. Call it before serving; a pattern that
// conflicts with an API route panics, as http.ServeMux does.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// noRoute answers 405 (with Allow) when the path exists under another
// method, 404 otherwise; both as JSON.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := s.mux.Handler(probe); p != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path, nil)
		return
	}
	writeError(w, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path, nil)
}

// ServeHTTP routes a request, with a server span, a log line and the
// request observer around it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	_, pattern := s.mux.Handler(r)
	if pattern == "/" {
		pattern = ""
	}
	ctx := s.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	name := pattern
	if name == "" {
		name = r.Method
	}
	ctx, span := s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method),
			attribute.String("http.route", pattern), attribute.String("url.path", r.URL.Path)))
	defer span.End()

	rec := &recorder{ResponseWriter: w, code: http.StatusOK}
	s.mux.ServeHTTP(rec, r.WithContext(ctx))

	span.SetAttributes(attribute.Int("http.response.status_code", rec.code))
	if rec.code >= 500 {
		span.SetStatus(codes.Error, http.StatusText(rec.code))
	}
	d := time.Since(start)
	if s.cfg.ObserveRequest != nil {
		s.cfg.ObserveRequest(pattern, rec.code, d, rec.stream)
	}
	level := slog.LevelInfo
	if pattern == "GET /healthz" || pattern == "GET /readyz" || pattern == "GET /metrics" {
		level = slog.LevelDebug
	}
	attrs := []any{"method", r.Method, "path", r.URL.Path, "code", rec.code, "duration", d}
	if rec.taskID != "" {
		attrs = append(attrs, "task_id", rec.taskID)
	}
	s.log.Log(ctx, level, "http request", attrs...)
}

// recorder remembers the status code; Unwrap lets http.ResponseController
// reach the connection's Flush and SetWriteDeadline.
type recorder struct {
	http.ResponseWriter
	code   int
	wrote  bool
	stream bool
	taskID string
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush forwards to the underlying writer when it can flush.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// auth guards a /v1/ handler with the bearer token (when one is set) and
// notes the request's task id for the log line.
func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if rec, ok := w.(*recorder); ok {
			rec.taskID = r.PathValue("id")
		}
		if s.cfg.Token == "" {
			h(w, r)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !ok || subtle.ConstantTimeCompare(sum[:], s.token[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="wrench"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong bearer token", nil)
			return
		}
		h(w, r)
	}
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(r.Context()); err != nil {
			writeError(w, http.StatusServiceUnavailable, "not ready: "+err.Error(), nil)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ready\n")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string, fields []task.FieldError) {
	writeJSON(w, code, ErrorBody{Error: msg, Fields: fields})
}
