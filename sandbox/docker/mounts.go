package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/wrenchworks/wrench/sandbox"
)

// HiddenPathsError says that the engine cannot see some of the paths this
// process bind-mounts into sandboxes: the engine resolves bind-mount
// sources on its own host, so when wrench runs in a container whose data
// directory is not mounted at the same path on the engine's side, every
// sandbox would fail to start.
type HiddenPathsError struct {
	// Paths are the paths (as this process sees them) the engine does not
	// have at the same path.
	Paths []string
}

func (e *HiddenPathsError) Error() string {
	return fmt.Sprintf("the docker engine cannot see %s at the same path as this process, and sandboxes bind-mount from there: %s",
		strings.Join(e.Paths, ", "), e.Fix())
}

// Fix says what to do about it.
func (e *HiddenPathsError) Fix() string {
	return "mount the data directory at the same path inside wrench's container as on the engine's host " +
		"(e.g. docker run -v /var/lib/wrench:/var/lib/wrench, not a named volume; with a sidecar engine, the same volume at the same path in both containers)"
}

// CheckBindSources checks that the engine sees each of paths as this
// process does, so that bind-mounting them into sandboxes works. For each
// path (a directory, or a file whose directory is used) it writes a probe
// file with a random name in that directory and creates, without starting,
// a container from image that bind-mounts the probes: the engine refuses
// the create when a source does not exist on its host, and a random name
// cannot exist there by coincidence. The probes and the container are
// removed before it returns.
//
// It returns a [*HiddenPathsError] naming the paths the engine cannot see,
// a [sandbox.Error] of kind ErrImageMissing or ErrUnavailable when it
// cannot tell (no image, no engine), and nil when every path is visible.
func (e *Engine) CheckBindSources(ctx context.Context, image string, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	var probes []string
	defer func() {
		for _, p := range probes {
			os.Remove(p)
		}
	}()
	var hidden []string
	for _, p := range paths {
		probe, err := writeProbe(p)
		if err != nil {
			return err
		}
		probes = append(probes, probe)
		visible, err := e.sees(ctx, image, probe)
		if err != nil {
			return err
		}
		if !visible {
			hidden = append(hidden, p)
		}
	}
	if len(hidden) > 0 {
		return &HiddenPathsError{Paths: hidden}
	}
	return nil
}

// CheckBindSources checks that the engine sees the shim binary and each
// of extra (directories or files this process will bind-mount into
// sandboxes) at the same paths, with the default image; see the function
// [Engine.CheckBindSources].
func (p *Provider) CheckBindSources(ctx context.Context, extra ...string) error {
	return p.eng.CheckBindSources(ctx, p.cfg.DefaultImage, append([]string{p.cfg.ShimPath}, extra...))
}

// writeProbe writes an empty file with a random name next to (or, for a
// directory, into) path and returns the file's path.
func writeProbe(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("check bind-mount source: %w", err)
	}
	dir := path
	if !fi.IsDir() {
		dir = filepath.Dir(path)
	}
	var b [8]byte
	rand.Read(b[:])
	probe := filepath.Join(dir, ".wrench-probe-"+hex.EncodeToString(b[:]))
	f, err := os.OpenFile(probe, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", fmt.Errorf("check bind-mount source %s: write a probe: %w", path, err)
	}
	return probe, f.Close()
}

// sees reports whether the engine accepts probe as a bind-mount source.
func (e *Engine) sees(ctx context.Context, image, probe string) (bool, error) {
	cfg := &container.Config{Image: image, Entrypoint: []string{"/.wrench-probe"}}
	hc := &container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{{
		Type: mount.TypeBind, Source: probe, Target: "/.wrench-probe", ReadOnly: true,
	}}}
	created, err := e.cli.ContainerCreate(ctx, cfg, hc, nil, nil, "")
	switch {
	case err == nil:
		rerr := e.cli.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true})
		if rerr != nil && !cerrdefs.IsNotFound(rerr) {
			return true, engineErr("remove probe container", rerr)
		}
		return true, nil
	case cerrdefs.IsInvalidArgument(err) && strings.Contains(err.Error(), "bind source path does not exist"):
		return false, nil
	case cerrdefs.IsNotFound(err):
		return false, sbErr(sandbox.ErrImageMissing, "check bind sources", fmt.Errorf("image %s not found; run `wrench image build`: %w", image, err))
	}
	return false, engineErr("check bind sources", err)
}
