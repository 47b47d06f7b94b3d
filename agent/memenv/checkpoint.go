package memenv

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/wrenchworks/wrench/diff"
)

// Checkpoint implements sandbox.Checkpointer: it snapshots every file.
func (e *Env) Checkpoint(ctx context.Context, message string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nextSnap++
	id := fmt.Sprintf("cp-%d", e.nextSnap)
	e.snaps[id] = maps.Clone(e.files)
	return id, nil
}

// Rollback implements sandbox.Checkpointer: it restores a snapshot exactly.
func (e *Env) Rollback(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	snap, ok := e.snaps[id]
	if !ok {
		return fmt.Errorf("rollback: unknown checkpoint %q", id)
	}
	e.files = maps.Clone(snap)
	return nil
}

// Diff implements sandbox.Checkpointer: the unified diff from the files New
// was given to the current ones.
func (e *Env) Diff(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	paths := map[string]bool{}
	for p := range e.base {
		paths[p] = true
	}
	for p := range e.files {
		paths[p] = true
	}
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		var before, after []byte
		if f, ok := e.base[p]; ok {
			before = f.data
		}
		if f, ok := e.files[p]; ok {
			after = f.data
		}
		d, _, _ := diff.Unified(p, before, after)
		if d != "" {
			fmt.Fprintf(&b, "diff --git a/%s b/%s\n%s", p, p, d)
		}
	}
	return b.String(), nil
}
