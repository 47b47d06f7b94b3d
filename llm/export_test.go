package llm

import (
	"context"
	"net/http"
	"time"
)

// SetRetryHooks replaces the client's wait between attempts and its jitter.
func SetRetryHooks(c *Client, sleep func(ctx context.Context, d time.Duration) error, jitter func(time.Duration) time.Duration) {
	c.sleep, c.jitter = sleep, jitter
}

// Backoff exposes the backoff schedule.
func Backoff(c *Client, n int) time.Duration { return c.backoff(n) }

// RetryAfter exposes the Retry-After parser.
func RetryAfter(h http.Header, now time.Time) time.Duration { return retryAfter(h, now) }
