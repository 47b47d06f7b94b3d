package github

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/task"
)

// Webhook headers GitHub sends with every delivery.
const (
	HeaderSignature = "X-Hub-Signature-256"
	HeaderEvent     = "X-GitHub-Event"
	HeaderDelivery  = "X-GitHub-Delivery"
)

// DefaultWebURL is where GitHub's repositories are cloned from.
const DefaultWebURL = "https://github.com"

// WebhookConfig configures a [Webhook].
type WebhookConfig struct {
	// Secret is the webhook's secret; required. Every delivery must carry
	// its HMAC-SHA256 in X-Hub-Signature-256.
	Secret []byte
	// Submit queues a task (queue.Submissions.Submit fits): duplicate is true
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
	// MaxReads bounds the bodies read at once before their signature is
	// known (DefaultMaxReads when zero); ReadTimeout bounds the wait for a
	// turn plus the reading (DefaultReadTimeout when zero). A delivery
	// without a well-formed signature header is refused unread.
	MaxReads    int
	ReadTimeout time.Duration
	// API, when set, lets the webhook act on GitHub: check that whoever
	// asks for a follow-up on a pull request has write access, read the
	// pull request a conversation comment is on and the review thread a
	// review comment belongs to, and tell an issue whose repository the
	// policy refuses how to allow it. Without it, follow-ups are refused
	// (202 with the reason) and refused repositories are only answered.
	API *Client
	// Policy, when set, decides which repositories may run tasks: a
	// delivery for one it refuses gets a comment on its issue saying how
	// to allow it, and no task.
	Policy *policy.Policy
	// PermissionTTL is how long a collaborator's permission is cached
	// (one minute when zero).
	PermissionTTL time.Duration
	// Logger receives one line per delivery (never the payload or the
	// signature); nil discards.
	Logger *slog.Logger
}

// Webhook is the http.Handler for GitHub's webhook deliveries. It is safe
// for concurrent use.
//
// A delivery is answered:
//   - 401 when X-Hub-Signature-256 is missing or malformed (the body is
//     not read) or wrong (the body was read and hashed at once, within
//     the body limit; nothing is submitted);
//   - 413 over the body limit (unread when Content-Length says so), 405
//     for a method other than POST;
//   - 503 with Retry-After when MaxReads bodies are being read and no
//     turn came within ReadTimeout;
//   - 400 when the event or delivery header is missing or the payload is
//     not the JSON its event promises;
//   - 200 {"status":"ok"} for ping;
//   - 201 {"status":"queued","task_id":…} when a task was submitted, 200
//     {"status":"duplicate",…} when it was already known (a redelivery);
//   - 202 {"status":"ignored","reason":…} for every other event or action
//     (unknown events too), and for a repository the policy refuses (its
//     issue is told how to allow it);
//   - 400 naming the fields when the task would ask for more than the
//     policy allows (the webhook's Limits over the policy's maximum);
//   - 503 when the queue refused the task, or GitHub's API could not be
//     read (GitHub shows the failure and the delivery can be redelivered).
type Webhook struct {
	cfg         WebhookConfig
	log         *slog.Logger
	web         *url.URL
	allowed     map[string]bool
	permissions permCache
	// reads holds a token per body being read.
	reads chan struct{}
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
	if cfg.MaxReads <= 0 {
		cfg.MaxReads = DefaultMaxReads
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	web, err := parseWebURL(cfg.WebURL)
	if err != nil {
		return nil, err
	}
	if cfg.PermissionTTL <= 0 {
		cfg.PermissionTTL = time.Minute
	}
	w := &Webhook{cfg: cfg, log: cfg.Logger, web: web, permissions: permCache{ttl: cfg.PermissionTTL},
		reads: make(chan struct{}, cfg.MaxReads)}
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
	body, berr := w.readSigned(rw, r)
	if berr != nil {
		reply(berr.code, answer{Status: "error", Reason: berr.reason})
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
	t, reason, err := w.taskFor(r.Context(), event, delivery, payload)
	if errors.Is(err, errUpstream) {
		reply(http.StatusServiceUnavailable, answer{Status: "error", Reason: err.Error()})
		return
	}
	if err != nil {
		reply(http.StatusBadRequest, answer{Status: "error", Reason: err.Error()})
		return
	}
	if t == nil {
		reply(http.StatusAccepted, answer{Status: "ignored", Reason: reason})
		return
	}
	if reason, denied := w.refused(r.Context(), *t); denied {
		reply(http.StatusAccepted, answer{Status: "ignored", TaskID: t.ID, Reason: reason})
		return
	}
	if w.cfg.Policy != nil {
		// What the task asks for (the webhook's limits, the repository's
		// URL) must be within the policy, as for the API.
		var ve *task.ValidationError
		if err := w.cfg.Policy.Admit(*t); errors.As(err, &ve) {
			reply(http.StatusBadRequest, answer{Status: "error", TaskID: t.ID, Reason: "the server policy does not allow this task: " + err.Error()})
			return
		}
	}
	t.Tenant = w.tenant(*t)
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

// tenant assigns a webhook task's tenant from the policy: by the owner of
// the repository the event came from, else by the repository's URL
// (docs/decisions.md, Tenants).
func (w *Webhook) tenant(t task.Task) string {
	if w.cfg.Policy == nil {
		return task.DefaultTenant
	}
	who := policy.Who{Repo: t.Repo.URL}
	if ref, err := parseIssue(t.Source.Issue); err == nil {
		who.GitHubOwner = ref.owner
	}
	return w.cfg.Policy.Tenant(who)
}
