package llm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/wrenchworks/wrench/agent"
)

// Defaults for the zero values of [Config].
const (
	DefaultRequestTimeout = 5 * time.Minute
	DefaultMaxRetries     = 3
	DefaultBackoffBase    = time.Second
	DefaultBackoffMax     = 30 * time.Second
	DefaultMaxRetryAfter  = 2 * time.Minute
	// DefaultMaxReplyBytes is about two million tokens: far beyond any
	// model's output limit, far below what hurts the process.
	DefaultMaxReplyBytes = 8 << 20
)

// Config configures a [Client]. The zero value of every field but BaseURL
// is usable.
type Config struct {
	// BaseURL is the endpoint's base URL, e.g. https://api.openai.com/v1.
	// Required.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer …"; empty sends no
	// Authorization header (local endpoints).
	APIKey string
	// Model is used when a request names no model.
	Model string
	// RequestTimeout bounds one attempt, the whole streamed reply included
	// (default DefaultRequestTimeout). The caller's context bounds the call
	// with all its retries.
	RequestTimeout time.Duration
	// MaxRetries is how many times a failed attempt is repeated: 0 means
	// DefaultMaxRetries, negative means never.
	MaxRetries int
	// BackoffBase and BackoffMax shape the exponential backoff between
	// attempts: about BackoffBase·2^n, at most BackoffMax, with jitter
	// (defaults DefaultBackoffBase, DefaultBackoffMax).
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// MaxRetryAfter is the longest server-requested wait the client sits
	// out; a longer Retry-After ends the call (default DefaultMaxRetryAfter).
	MaxRetryAfter time.Duration
	// MaxReplyBytes bounds one reply (default DefaultMaxReplyBytes): the
	// text, reasoning, tool names, ids and arguments of a streamed reply
	// together, and each of its server-sent events; the body of a whole
	// (non-streamed) reply or of an error. A streamed reply may take eight
	// times as many bytes on the wire, for the framing. Past a bound the
	// attempt ends with ModelBadResponse, which is retried.
	MaxReplyBytes int64
	// NoStream asks for whole replies instead of server-sent events.
	// Streaming is the default.
	NoStream bool
	// LegacyMaxTokens sends a request's MaxTokens as "max_tokens" instead
	// of "max_completion_tokens", for endpoints that only know the former.
	LegacyMaxTokens bool
	// GenerateMissingCallIDs gives a tool call that arrives without an id a
	// generated one instead of failing the call with ModelBadResponse.
	GenerateMissingCallIDs bool
	// HTTPClient sends the requests (default http.DefaultClient). Its own
	// Timeout, if any, also applies.
	HTTPClient *http.Client
	// Logger receives retry warnings and per-call debug lines; never the
	// API key or message contents. Nil discards.
	Logger *slog.Logger
}

// Client is an agent.Model over an OpenAI-compatible chat completions
// endpoint. It is safe for concurrent use.
type Client struct {
	cfg Config
	svc openai.ChatCompletionService
	log *slog.Logger

	// sleep waits between attempts; jitter randomizes a backoff. Tests
	// replace them.
	sleep  func(ctx context.Context, d time.Duration) error
	jitter func(d time.Duration) time.Duration
}

var _ agent.Model = (*Client)(nil)

// New returns a client for cfg. It fails only on an invalid BaseURL.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("llm client: base URL %q must be an absolute http(s) URL", cfg.BaseURL)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	if cfg.BackoffMax < cfg.BackoffBase {
		cfg.BackoffMax = cfg.BackoffBase
	}
	if cfg.MaxRetryAfter <= 0 {
		cfg.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if cfg.MaxReplyBytes <= 0 {
		cfg.MaxReplyBytes = DefaultMaxReplyBytes
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	// The service is built from explicit options only: openai.NewClient
	// would read OPENAI_* from the process environment.
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(httpClient),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return &Client{
		cfg:    cfg,
		svc:    openai.NewChatCompletionService(opts...),
		log:    logger,
		sleep:  sleepCtx,
		jitter: equalJitter,
	}, nil
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// equalJitter keeps half of d and randomizes the other half.
func equalJitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + rand.N(d-half)
}

// backoff is the wait before retry number n (from 0).
func (c *Client) backoff(n int) time.Duration {
	d := c.cfg.BackoffBase
	for i := 0; i < n && d < c.cfg.BackoffMax; i++ {
		d *= 2
	}
	return c.jitter(min(d, c.cfg.BackoffMax))
}

// errAttemptTimeout is the cause of an attempt's context ending at
// RequestTimeout.
var errAttemptTimeout = errors.New("request timeout")
