package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// The disk limit of a writable root is measured on the container's
// copy-on-write layer. Asking the engine (inspect with size) costs, on a
// storage driver without native diffs such as fuse-overlayfs, a walk of
// the whole image through FUSE, not of what the sandbox wrote: with a few
// sandboxes on a host those walks kept the engine so busy that starting a
// container took minutes. So the layer's upper directory is walked on the
// host when this process can read it (the engine's own data directory, as
// root, on the same host), and the engine is asked otherwise, one
// measurement at a time per provider.

// diskUsed is what the sandbox wrote: for a writable root, the size of its
// copy-on-write layer (files in directories the sandbox user made
// unreadable count too); for a bind-mounted workspace, the shim's walk of
// it.
func (s *Sandbox) diskUsed(ctx context.Context) (int64, error) {
	if !s.spec.WritableRoot {
		return s.client.Usage(ctx)
	}
	if s.upper == "" {
		s.upper = s.upperDir(ctx)
	}
	if s.upper != "-" {
		n, err := dirSize(ctx, s.upper)
		if err == nil {
			s.hostMeasures.Add(1)
			return n, nil
		}
		if ctx.Err() != nil {
			return 0, err
		}
		s.p.cfg.Logger.InfoContext(ctx, "sandbox disk use: measuring through the engine", "id", shortID(s.id), "task_id", s.spec.TaskID, "err", err)
		s.upper = "-"
	}
	return s.engineLayerSize(ctx)
}

// upperDir is the container layer's upper directory when this process can
// walk it, else "-".
func (s *Sandbox) upperDir(ctx context.Context) string {
	st, err := s.p.cli.ContainerInspect(ctx, s.id)
	if err != nil || st.GraphDriver.Data == nil {
		return "-"
	}
	dir := st.GraphDriver.Data["UpperDir"]
	if dir == "" || !filepath.IsAbs(dir) {
		return "-"
	}
	f, err := os.Open(dir) // fails where the engine's data is not on this host (a sidecar engine) or not ours to read
	if err != nil {
		return "-"
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.IsDir() {
		return "-"
	}
	return dir
}

// engineLayerSize asks the engine for the layer's size; a provider has one
// such request in flight at a time.
func (s *Sandbox) engineLayerSize(ctx context.Context) (int64, error) {
	select {
	case s.p.engineSizes <- struct{}{}:
		defer func() { <-s.p.engineSizes }()
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	st, _, err := s.p.cli.ContainerInspectWithRaw(ctx, s.id, true)
	if err != nil {
		return 0, err
	}
	if st.SizeRw == nil {
		return 0, fmt.Errorf("the engine did not report the layer's size")
	}
	return *st.SizeRw, nil
}

// dirSize is the apparent size of everything under dir but directories,
// each hard-linked file once, symlinks not followed: what the engine
// counts for a layer. It stops with ctx.
func dirSize(ctx context.Context, dir string) (int64, error) {
	var total int64
	seen := map[uint64]bool{}
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while walking
		}
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		total += fi.Size()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measure %s: %w", dir, err)
	}
	return total, nil
}
