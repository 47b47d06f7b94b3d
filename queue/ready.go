package queue

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of [Config].BindRetry: the first wait after a failed bind, and
// the longest, which the waits double up to.
const (
	DefaultBindRetryMin = 250 * time.Millisecond
	DefaultBindRetryMax = 5 * time.Second
)

// Backoff is how long to wait between attempts: Min after the first
// failure, doubling after each further one up to Max.
type Backoff struct {
	Min, Max time.Duration
}

func (b Backoff) withDefaults() Backoff {
	if b.Min <= 0 {
		b.Min = DefaultBindRetryMin
	}
	if b.Max <= 0 {
		b.Max = DefaultBindRetryMax
	}
	b.Max = max(b.Max, b.Min)
	return b
}

// next is the wait after wait.
func (b Backoff) next(wait time.Duration) time.Duration { return min(2*wait, b.Max) }

// sleep waits d, and reports false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// bindWhenReady binds the streams and buckets, and binds again after an
// error that passes by itself (JetStream starting, a leader being elected,
// a request timing out meanwhile) until ctx ends. Other errors (bad
// configuration, missing permissions) are returned at once.
func bindWhenReady(ctx context.Context, nc *nats.Conn, cfg Config) (*Conn, error) {
	wait := cfg.BindRetry.Min
	waitingFor := ""
	for attempt := 1; ; attempt++ {
		c, err := bindAttempt(ctx, nc, cfg)
		switch {
		case err == nil:
			return c, nil
		case ctx.Err() != nil:
			return nil, ended(ctx, err, waitingFor)
		}
		if waitingFor = awaited(nc, err); waitingFor == "" {
			return nil, refused(nc, err)
		}
		cfg.Logger.Warn("queue not ready; binding again", "waiting_for", waitingFor,
			"attempt", attempt, "retry_in", wait, "err", err)
		if !sleep(ctx, wait) {
			return nil, ended(ctx, err, waitingFor)
		}
		wait = cfg.BindRetry.next(wait)
	}
}

// dial connects to the NATS at url. While no server there answers (none
// runs yet, or it is restarting) it logs a warning and tries again, with
// backoff (Config.BindRetry), until ctx ends; any other refusal (a wrong
// credential, TLS) is returned at once. Errors name the URL without its
// password.
func dial(ctx context.Context, url string, opts []nats.Option, cfg Config) (*nats.Conn, error) {
	shown := redactURL(url)
	wait := cfg.BindRetry.Min
	for attempt := 1; ; attempt++ {
		nc, err := nats.Connect(url, opts...)
		switch {
		case err == nil:
			return nc, nil
		case !errors.Is(err, nats.ErrNoServers):
			return nil, fmt.Errorf("connect to nats %s: %w", shown, err)
		}
		cfg.Logger.Warn("nats not reachable; connecting again", "url", shown,
			"attempt", attempt, "retry_in", wait, "err", err)
		if !sleep(ctx, wait) {
			return nil, fmt.Errorf("connect to nats %s: %w (gave up waiting for a server: %w)", shown, err, context.Cause(ctx))
		}
		wait = cfg.BindRetry.next(wait)
	}
}

// redactURL is a NATS URL list (comma-separated) with passwords and
// tokens (a user name without a password) hidden.
func redactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		u, err := neturl.Parse(strings.TrimSpace(p))
		if err != nil || u.User == nil {
			continue
		}
		if _, ok := u.User.Password(); !ok {
			u.User = neturl.User("xxxxx")
		}
		parts[i] = u.Redacted()
	}
	return strings.Join(parts, ",")
}

// bindAttempt binds once, without ctx's deadline, so that each JetStream
// request times out by itself (the client's default, 5 s) and one that a
// cluster without a leader leaves unanswered is tried again instead of
// taking all of ctx; it still stops when ctx ends.
func bindAttempt(ctx context.Context, nc *nats.Conn, cfg Config) (*Conn, error) {
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	return bind(actx, nc, cfg)
}

// ended is the error of a bind that ctx ended while it failed with err,
// waiting for waitingFor (if anything).
func ended(ctx context.Context, err error, waitingFor string) error {
	cause := context.Cause(ctx)
	switch {
	case waitingFor != "":
		return fmt.Errorf("%w (gave up waiting for %s: %w)", err, waitingFor, cause)
	case errors.Is(err, cause):
		return err
	}
	return fmt.Errorf("%w (%w)", err, cause)
}

// refused is err, with the permission the server refused when that is
// why a request went unanswered.
func refused(nc *nats.Conn, err error) error {
	if last := nc.LastError(); errors.Is(last, nats.ErrPermissionViolation) && !errors.Is(err, nats.ErrPermissionViolation) {
		return fmt.Errorf("%w (%w)", err, last)
	}
	return err
}

// JetStream API error codes of a cluster that is not ready yet.
const (
	jsCodeClusterNoPeers       = 10005 // no suitable peers for placement
	jsCodeClusterNotAvailable  = 10008 // JetStream system temporarily unavailable
	jsCodeClusterNotLeader     = 10009 // JetStream cluster can not handle request
	jsCodeStreamOffline        = 10118 // stream is offline
	jsCodeStreamOfflineReason  = 10194 // stream is offline: reason
	jsCodeMemberChangeInFlight = 10202 // cluster member change is in progress
)

// awaited names what a bind that failed with err waits for when err
// passes by itself, and is "" when it does not.
func awaited(nc *nats.Conn, err error) string {
	// A request the server refuses for permissions is not answered: it
	// times out, and the refusal is the connection's last error.
	if errors.Is(err, nats.ErrPermissionViolation) || errors.Is(nc.LastError(), nats.ErrPermissionViolation) {
		return ""
	}
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return "JetStream to start (no responders)"
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return "a stream to answer a publish (no responders: a stream being placed?)"
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return "JetStream to answer (timed out: a leader being elected?)"
	case errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrConnectionReconnecting):
		return "the connection to NATS"
	case errors.As(err, &apiErr):
		return awaitedAPI(apiErr)
	}
	return ""
}

// awaitedAPI is [awaited] of an error the JetStream API answered.
func awaitedAPI(e *jetstream.APIError) string {
	switch e.ErrorCode {
	case jsCodeClusterNotAvailable, jsCodeClusterNotLeader:
		return "the JetStream cluster to elect a leader (" + e.Description + ")"
	case jsCodeStreamOffline, jsCodeStreamOfflineReason:
		return "a stream's replicas to elect a leader (" + e.Description + ")"
	case jsCodeClusterNoPeers, jsCodeMemberChangeInFlight:
		return "enough cluster nodes for the replicas (" + e.Description + ")"
	}
	return ""
}
