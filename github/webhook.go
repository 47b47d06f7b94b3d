package github

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/wrenchworks/wrench/task"
)

// Webhook headers GitHub sends with every delivery.
const (
	HeaderSignature = "X-Hub-Signature-256"
	HeaderEvent     = "X-GitHub-Event"
	HeaderDelivery  = "X-GitHub-Delivery"
)

// DefaultMaxBody is the webhook body limit when WebhookConfig.MaxBody is
// zero: GitHub caps payloads at 25 MB.
const DefaultMaxBody = 25 << 20

// DefaultWebURL is where GitHub's repositories are cloned from.
const DefaultWebURL = "https://github.com"

// WebhookConfig configures a [Webhook].
type WebhookConfig struct {
	// Secret is the webhook's secret; required. Every delivery must carry
	// its HMAC-SHA256 in X-Hub-Signature-256.
	Secret []byte
	// Submit queues a task (queue.Conn.Submit fits): duplicate is true
	// when a task with the same id is already known.
	Submit func(ctx context.Context, t task.Task) (st task.Status, duplicate bool, err error)
	// Label is the issue label that starts a task ("wrench" when empty;
	// compared case-insensitively, as GitHub does).
	Label string
	// CommandPrefix starts a task from an issue comment ("/wrench" when
	// empty); it must be the comment's first word.
	CommandPrefix string
	// AllowedRepos, when not empty, lists the "owner/repo" names whose
	// events may start tasks (case-insensitive); others are ignored.
	AllowedRepos []string
	// WebURL is the GitHub host's web root (DefaultWebURL when empty, or
	// e.g. "https://ghe.example.com"). A repository's clone_url must be
	// WebURL/owner/repo.git, so a webhook can only ever make Wrench clone
	// that host over https, never a local path.
	WebURL string
	// TestCommand, when set, returns the test command for "owner/repo"
	// ("" lets the agent's finish decide).
	TestCommand func(repo string) string
	// Limits are the limits of tasks created from webhooks (zero: the
	// worker's defaults).
	Limits task.Limits
	// MaxBody caps the request body (DefaultMaxBody when zero); larger
	// bodies answer 413 and submit nothing.
	MaxBody int64
	// Logger receives one line per delivery (never the payload or the
	// signature); nil discards.
	Logger *slog.Logger
}

// Webhook is the http.Handler for GitHub's webhook deliveries. It is safe
// for concurrent use.
//
// A delivery is answered:
//   - 401 when X-Hub-Signature-256 is missing or wrong (nothing is read
//     beyond the body, nothing is submitted);
//   - 413 over the body limit, 405 for a method other than POST;
//   - 400 when the event or delivery header is missing or the payload is
//     not the JSON its event promises;
//   - 200 {"status":"ok"} for ping;
//   - 201 {"status":"queued","task_id":…} when a task was submitted, 200
//     {"status":"duplicate",…} when it was already known (a redelivery);
//   - 202 {"status":"ignored","reason":…} for every other event or action;
//   - 503 when the queue refused the task (GitHub shows the failure and
//     the delivery can be redelivered).
type Webhook struct {
	cfg     WebhookConfig
	log     *slog.Logger
	web     *url.URL
	allowed map[string]bool
}

// NewWebhook checks cfg and returns a Webhook.
func NewWebhook(cfg WebhookConfig) (*Webhook, error) {
	if len(cfg.Secret) == 0 {
		return nil, errors.New("github: webhook Secret is required")
	}
	if cfg.Submit == nil {
		return nil, errors.New("github: webhook Submit is required")
	}
	if cfg.Label == "" {
		cfg.Label = "wrench"
	}
	if cfg.CommandPrefix == "" {
		cfg.CommandPrefix = "/wrench"
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	web, err := parseWebURL(cfg.WebURL)
	if err != nil {
		return nil, err
	}
	w := &Webhook{cfg: cfg, log: cfg.Logger, web: web}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if len(cfg.AllowedRepos) > 0 {
		w.allowed = map[string]bool{}
		for _, r := range cfg.AllowedRepos {
			w.allowed[strings.ToLower(strings.TrimSpace(r))] = true
		}
	}
	return w, nil
}

// parseWebURL checks a GitHub web root (DefaultWebURL when empty).
func parseWebURL(raw string) (*url.URL, error) {
	if raw == "" {
		raw = DefaultWebURL
	}
	u, err := url.Parse(strings.TrimSuffix(raw, "/"))
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return nil, fmt.Errorf("github: web URL %q: want https://host[/path]", raw)
	}
	return u, nil
}

// answer is the JSON body of every webhook response.
type answer struct {
	Status string `json:"status"`
	TaskID string `json:"task_id,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// ServeHTTP handles one delivery.
func (w *Webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	event, delivery := r.Header.Get(HeaderEvent), r.Header.Get(HeaderDelivery)
	log := w.log.With("event", event, "delivery", delivery)
	reply := func(code int, a answer) {
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(code)
		_ = json.NewEncoder(rw).Encode(a)
		level := slog.LevelInfo
		if code >= 500 {
			level = slog.LevelError
		} else if code >= 400 {
			level = slog.LevelWarn
		}
		attrs := []any{"code", code, "status", a.Status}
		if a.TaskID != "" {
			attrs = append(attrs, "task_id", a.TaskID)
		}
		if a.Reason != "" {
			attrs = append(attrs, "reason", a.Reason)
		}
		log.Log(r.Context(), level, "github webhook", attrs...)
	}
	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		reply(http.StatusMethodNotAllowed, answer{Status: "error", Reason: "use POST"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, w.cfg.MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			reply(http.StatusRequestEntityTooLarge, answer{Status: "error", Reason: fmt.Sprintf("body over %d bytes", w.cfg.MaxBody)})
			return
		}
		reply(http.StatusBadRequest, answer{Status: "error", Reason: "read body: " + err.Error()})
		return
	}
	if !w.verify(body, r.Header.Get(HeaderSignature)) {
		reply(http.StatusUnauthorized, answer{Status: "error", Reason: "missing or wrong " + HeaderSignature})
		return
	}
	if event == "" || delivery == "" {
		reply(http.StatusBadRequest, answer{Status: "error", Reason: "missing " + HeaderEvent + " or " + HeaderDelivery})
		return
	}
	payload, err := jsonPayload(r.Header.Get("Content-Type"), body)
	if err != nil {
		reply(http.StatusBadRequest, answer{Status: "error", Reason: err.Error()})
		return
	}
	if event == "ping" {
		reply(http.StatusOK, answer{Status: "ok", Reason: "pong"})
		return
	}
	t, reason, err := w.taskFor(event, delivery, payload)
	if err != nil {
		reply(http.StatusBadRequest, answer{Status: "error", Reason: err.Error()})
		return
	}
	if t == nil {
		reply(http.StatusAccepted, answer{Status: "ignored", Reason: reason})
		return
	}
	st, dup, err := w.cfg.Submit(r.Context(), *t)
	var ve *task.ValidationError
	switch {
	case errors.As(err, &ve):
		reply(http.StatusBadRequest, answer{Status: "error", TaskID: t.ID, Reason: err.Error()})
	case err != nil:
		reply(http.StatusServiceUnavailable, answer{Status: "error", TaskID: t.ID, Reason: "queue: " + err.Error()})
	case dup:
		reply(http.StatusOK, answer{Status: "duplicate", TaskID: st.TaskID, Reason: "this delivery already made a task"})
	default:
		reply(http.StatusCreated, answer{Status: "queued", TaskID: st.TaskID})
	}
}

// verify checks the X-Hub-Signature-256 header against body, in constant
// time.
func (w *Webhook) verify(body []byte, header string) bool {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	m := hmac.New(sha256.New, w.cfg.Secret)
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}

// jsonPayload returns the event JSON: the body itself, or its "payload"
// field when the webhook is configured for application/x-www-form-urlencoded.
func jsonPayload(contentType string, body []byte) ([]byte, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/x-www-form-urlencoded" {
		v, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, fmt.Errorf("form payload: %w", err)
		}
		body = []byte(v.Get("payload"))
	}
	if !json.Valid(body) || !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		return nil, errors.New("payload is not a JSON object")
	}
	return body, nil
}
