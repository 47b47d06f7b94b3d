package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/task"
)

// List returns tasks newest first (by CreatedAt, then ID), and the cursor of
// the next page ("" on the last page). It reads every state record once, so
// its cost grows with the number of tasks kept.
func (r *States) List(ctx context.Context, o task.ListOptions) ([]task.Status, string, error) {
	limit := o.Limit
	if limit <= 0 {
		limit = task.DefaultListLimit
	}
	limit = min(limit, task.MaxListLimit)
	var after *listKey
	if o.Cursor != "" {
		k, err := parseCursor(o.Cursor)
		if err != nil {
			return nil, "", err
		}
		after = &k
	}
	var all []task.Status
	err := r.c.scan(ctx, func(e entry) {
		if o.State != "" && e.st.State != o.State {
			return
		}
		if after != nil && !after.before(keyOf(e.st)) {
			return
		}
		all = append(all, e.st)
	})
	if err != nil {
		return nil, "", fmt.Errorf("list tasks: %w", err)
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

// scan calls fn with every task's state record.
func (c *Conn) scan(ctx context.Context, fn func(entry)) error {
	w, err := c.kv.Watch(ctx, stateKeyPrefix+"*", jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				return nil
			}
			var st task.Status
			if err := json.Unmarshal(e.Value(), &st); err == nil {
				fn(entry{st: st, rev: e.Revision()})
			}
		}
	}
}

// queuedEntries are the records that have said queued since before t.
func (c *Conn) queuedEntries(ctx context.Context, before time.Time) ([]entry, error) {
	var out []entry
	err := c.scan(ctx, func(e entry) {
		if e.st.State == task.StateQueued && e.st.UpdatedAt.Before(before) {
			out = append(out, e)
		}
	})
	return out, err
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
		return listKey{}, fmt.Errorf("list tasks: %w: %q", task.ErrBadCursor, s)
	}
	return listKey{time.Unix(0, n), id}, nil
}
