package queue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/task"
)

// Artifacts is the artifact store of a [Conn]: each task's patch,
// trajectory and logs, kept as "<id>/<name>".
type Artifacts struct{ c *Conn }

// Put stores each artifact as "<id>/<name>" in the artifact store
// and returns the names, sorted. Names must be plain file names.
func (a *Artifacts) Put(ctx context.Context, id string, artifacts map[string][]byte) ([]string, error) {
	names := make([]string, 0, len(artifacts))
	for name := range artifacts {
		if name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
			return nil, fmt.Errorf("store artifacts of %s: invalid name %q", id, name)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		meta := jetstream.ObjectMeta{Name: id + "/" + name}
		if _, err := a.c.obj.Put(ctx, meta, bytes.NewReader(artifacts[name])); err != nil {
			return nil, fmt.Errorf("store artifact %s/%s: %w", id, name, err)
		}
	}
	return names, nil
}

// Get returns the artifact name of task id, or an error wrapping
// [task.ErrNotFound].
func (a *Artifacts) Get(ctx context.Context, id, name string) ([]byte, error) {
	if !validID(id) || name == "" || strings.ContainsAny(name, "/\\") {
		return nil, fmt.Errorf("%w: artifact %s/%s", task.ErrNotFound, id, name)
	}
	b, err := a.c.obj.GetBytes(ctx, id+"/"+name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: artifact %s/%s", task.ErrNotFound, id, name)
	}
	if err != nil {
		return nil, fmt.Errorf("read artifact %s/%s: %w", id, name, err)
	}
	return b, nil
}
