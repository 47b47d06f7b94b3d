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
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/wrenchworks/wrench/task"
)

// Submitter takes tasks in and cancels them (queue.Submissions fits).
// Errors wrapping a *task.ValidationError answer 400; errors wrapping
// task.ErrNotFound answer 404.
type Submitter interface {
	// Submit queues t; duplicate is true (and st the existing status) when
	// a task with t's ID is already known.
	Submit(ctx context.Context, t task.Task) (st task.Status, duplicate bool, err error)
	// Cancel cancels task id: the final status of a task that was queued
	// or paused (or already final), the running status while its worker
	// stops it.
	Cancel(ctx context.Context, id string) (task.Status, error)
	// Resume queues a paused task again, to continue from where it
	// paused; an error wrapping task.ErrNotPaused (with its status) for a
	// task that is not paused.
	Resume(ctx context.Context, id string) (task.Status, error)
}

// States reads task states (queue.States fits).
type States interface {
	Status(ctx context.Context, id string) (task.Status, error)
	// List returns a page of tasks, newest first, and the next cursor; an
	// error wrapping task.ErrBadCursor for a cursor it did not issue.
	List(ctx context.Context, o task.ListOptions) ([]task.Status, string, error)
}

// EventSource follows a task's events (queue.Events fits).
type EventSource interface {
	// Follow streams the events of task id after fromSeq, closing the
	// channel after the result event or when ctx is done.
	Follow(ctx context.Context, id string, fromSeq uint64) (<-chan task.Event, error)
}

// ArtifactSource returns a task's stored artifacts (queue.Artifacts fits);
// an error wrapping task.ErrNotFound when there is none of that name.
type ArtifactSource interface {
	Get(ctx context.Context, id, name string) ([]byte, error)
}

// PatchArtifact is the artifact name of a task's patch.
const PatchArtifact = "patch.diff"

// DefaultMaxBody is the request body limit when Config.MaxBody is zero.
const DefaultMaxBody = 1 << 20

// Config configures a [Server].
type Config struct {
	// Submitter, States and Events are required.
	Submitter Submitter
	States    States
	Events    EventSource
	// Artifacts, when set, serves a patch that a result does not hold
	// inline.
	Artifacts ArtifactSource
	// Admit, when set, checks every submitted task against the server's
	// policy (policy.Policy.Admit fits): a task may narrow what the policy
	// allows, never widen it. A *task.ValidationError answers 400 naming
	// the fields; any other error (a repository the policy refuses) 403.
	Admit func(task.Task) error
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// every /v1/ request. /healthz, /readyz and /metrics are open.
	Token string
	// TenantToken, when set, names the tenant whose API token this is
	// (policy.Tokens.Lookup fits): such a token is accepted like Token,
	// and tasks submitted with it are that tenant's.
	TenantToken func(token string) (tenant string, ok bool)
	// Tenant, when set, assigns a submitted task's tenant from the tenant
	// of the request's token ("" when none) and the task
	// (policy.Policy.Tenant fits). A task naming another tenant than the
	// one assigned is refused (400); without Tenant every task is
	// task.DefaultTenant's. The client never chooses.
	Tenant func(tokenTenant string, t task.Task) string
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
	// of the caller's traceparent), whose context reaches the backends so the
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
	routes []string
}

// NewServer checks cfg and returns a Server.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Submitter == nil || cfg.States == nil || cfg.Events == nil {
		return nil, errors.New("api: Submitter, States and Events are required")
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

	s.handle("POST /v1/tasks", s.auth(s.submit))
	s.handle("GET /v1/tasks", s.auth(s.list))
	s.handle("GET /v1/tasks/{id}", s.auth(s.status))
	s.handle("GET /v1/tasks/{id}/events", s.auth(s.events))
	s.handle("GET /v1/tasks/{id}/patch", s.auth(s.patch))
	s.handle("GET /v1/tasks/{id}/artifacts/{name}", s.auth(s.artifact))
	s.handle("POST /v1/tasks/{id}/cancel", s.auth(s.cancel))
	s.handle("POST /v1/tasks/{id}/resume", s.auth(s.resume))
	s.handle("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	s.handle("GET /readyz", s.ready)
	if cfg.Metrics != nil {
		s.handle("GET /metrics", cfg.Metrics.ServeHTTP)
	}
	s.mux.HandleFunc("/", s.noRoute)
	return s, nil
}

// Handle mounts another handler on the server's mux (e.g. the GitHub
// webhook at "POST /webhooks/github"), outside the bearer-token check: h
// authenticates its own requests. Call it before serving; a pattern that
// conflicts with an API route panics, as http.ServeMux does.
func (s *Server) Handle(pattern string, h http.Handler) { s.handle(pattern, h.ServeHTTP) }

// handle mounts h at pattern and records the route.
func (s *Server) handle(pattern string, h http.HandlerFunc) {
	s.mux.HandleFunc(pattern, h)
	s.routes = append(s.routes, pattern)
}

// Routes returns the "METHOD /path" patterns the server answers, sorted
// (docs/api/openapi.yaml documents them; a test keeps the two in step).
func (s *Server) Routes() []string {
	return slices.Sorted(slices.Values(s.routes))
}

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
	probe := isProbe(pattern)
	span := trace.SpanFromContext(ctx)
	if !probe {
		// Scrapes and health probes are not traced: they would be most
		// of the spans and say nothing about tasks.
		name := pattern
		if name == "" {
			name = r.Method
		}
		ctx, span = s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method),
				attribute.String("http.route", pattern), attribute.String("url.path", r.URL.Path)))
		defer span.End()
	}

	rec := &recorder{ResponseWriter: w, code: http.StatusOK}
	s.mux.ServeHTTP(rec, r.WithContext(ctx))

	if !probe {
		span.SetAttributes(attribute.Int("http.response.status_code", rec.code))
		if rec.code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(rec.code))
		}
	}
	d := time.Since(start)
	if s.cfg.ObserveRequest != nil {
		s.cfg.ObserveRequest(pattern, rec.code, d, rec.stream)
	}
	level := slog.LevelInfo
	if probe {
		level = slog.LevelDebug
	}
	attrs := []any{"method", r.Method, "path", r.URL.Path, "code", rec.code, "duration", d}
	if rec.taskID != "" {
		attrs = append(attrs, "task_id", rec.taskID)
	}
	s.log.Log(ctx, level, "http request", attrs...)
}

// isProbe says whether route is a health probe or the metrics scrape
// (GET /healthz, /readyz and its sub-routes such as /readyz/worker,
// /metrics): these are neither traced nor logged above debug.
func isProbe(route string) bool {
	return route == "GET /healthz" || route == "GET /metrics" ||
		route == "GET /readyz" || strings.HasPrefix(route, "GET /readyz/")
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
		if s.cfg.Token == "" && s.cfg.TenantToken == nil {
			h(w, r)
			return
		}
		got, ok := bearer(r.Header.Get("Authorization"))
		sum := sha256.Sum256([]byte(got))
		admin := s.cfg.Token != "" && subtle.ConstantTimeCompare(sum[:], s.token[:]) == 1
		if !ok || (!admin && s.tokenTenant(got) == "") {
			w.Header().Set("WWW-Authenticate", `Bearer realm="wrench"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong bearer token", nil)
			return
		}
		h(w, r)
	}
}

// tokenTenant is the tenant whose token tok is ("" when none).
func (s *Server) tokenTenant(tok string) string {
	if s.cfg.TenantToken == nil || tok == "" {
		return ""
	}
	tenant, _ := s.cfg.TenantToken(tok)
	return tenant
}

// bearer returns the token of an "Authorization: Bearer <token>" header;
// the scheme is case-insensitive (RFC 9110 §11.1).
func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
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
