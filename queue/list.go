package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/task"
)

// ListOptions select and page the tasks [Conn.List] returns.
type ListOptions struct {
	// State keeps only tasks in this state; empty keeps all.
	State task.State
	// Limit caps the page (DefaultListLimit when zero, at most MaxListLimit).
	Limit int
	// Cursor continues after the page that returned it; empty starts at the
	// newest task.
	Cursor string
}

// ErrBadCursor reports a [ListOptions.Cursor] that [Conn.List] did not
// issue.
var ErrBadCursor = errors.New("invalid list cursor")

// Page sizes for [Conn.List].
const (
	DefaultListLimit = 50
	MaxListLimit     = 1000
)

// List returns tasks newest first (by CreatedAt, then ID), and the cursor of
// the next page ("" on the last page). It reads every state record once, so
// its cost grows with the number of tasks kept.
func (c *Conn) List(ctx context.Context, o ListOptions) ([]task.Status, string, error) {
	limit := o.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	var after *listKey
	if o.Cursor != "" {
		k, err := parseCursor(o.Cursor)
		if err != nil {
			return nil, "", err
		}
		after = &k
	}
	w, err := c.kv.Watch(ctx, stateKeyPrefix+"*", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, "", fmt.Errorf("list tasks: %w", err)
	}
	defer func() { _ = w.Stop() }()
	var all []task.Status
	for done := false; !done; {
		select {
		case <-ctx.Done():
			return nil, "", fmt.Errorf("list tasks: %w", ctx.Err())
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				done = true
				break
			}
			var st task.Status
			if err := json.Unmarshal(e.Value(), &st); err != nil {
				continue
			}
			if o.State != "" && st.State != o.State {
				continue
			}
			if after != nil && !after.before(keyOf(st)) {
				continue
			}
			all = append(all, st)
		}
	}
	slices.SortFunc(all, func(a, b task.Status) int {
		ka, kb := keyOf(a), keyOf(b)
		if ka.before(kb) {
			return -1
		}
		if kb.before(ka) {
			return 1
		}
		return 0
	})
	if len(all) <= limit {
		return all, "", nil
	}
	page := all[:limit]
	last := keyOf(page[limit-1])
	return page, strconv.FormatInt(last.created.UnixNano(), 10) + "~" + last.id, nil
}

// listKey orders tasks newest first.
type listKey struct {
	created time.Time
	id      string
}

func keyOf(st task.Status) listKey { return listKey{st.CreatedAt, st.TaskID} }

// before reports whether k sorts before o (is newer).
func (k listKey) before(o listKey) bool {
	if c := k.created.Compare(o.created); c != 0 {
		return c > 0
	}
	return cmp.Compare(k.id, o.id) > 0
}

func parseCursor(s string) (listKey, error) {
	ns, id, ok := strings.Cut(s, "~")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return listKey{}, fmt.Errorf("list tasks: %w: %q", ErrBadCursor, s)
	}
	return listKey{time.Unix(0, n), id}, nil
}
