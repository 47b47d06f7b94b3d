package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/wrenchworks/wrench/sandbox"
)

// InspectImage describes a local image; ok is false when the engine has
// no image of that name.
func (e *Engine) InspectImage(ctx context.Context, ref string) (img sandbox.Image, ok bool, err error) {
	if err := checkImage("inspect image", ref); err != nil {
		return img, false, err
	}
	ii, err := e.cli.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return img, false, nil
	}
	if err != nil {
		return img, false, engineErr("inspect image", err)
	}
	img = sandbox.Image{ID: ii.ID, Tags: ii.RepoTags, Size: ii.Size}
	if ii.Config != nil {
		img.Labels = ii.Config.Labels
	}
	if t, err := time.Parse(time.RFC3339Nano, ii.Created); err == nil {
		img.Created = t
	}
	return img, true, nil
}

// Images lists the local images that carry every one of labels ("key",
// any value, or "key=value"), oldest first.
func (e *Engine) Images(ctx context.Context, labels ...string) ([]sandbox.Image, error) {
	f := filters.NewArgs()
	for _, l := range labels {
		f.Add("label", l)
	}
	list, err := e.cli.ImageList(ctx, image.ListOptions{Filters: f})
	if err != nil {
		return nil, engineErr("list images", err)
	}
	out := make([]sandbox.Image, 0, len(list))
	for _, s := range list {
		out = append(out, sandbox.Image{ID: s.ID, Tags: s.RepoTags, Labels: s.Labels, Size: s.Size, Created: time.Unix(s.Created, 0)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// RemoveImage deletes a local image by name or id (its tags too), though
// a stopped container was made from it. An image that is already gone is
// not an error; one a running container uses is.
func (e *Engine) RemoveImage(ctx context.Context, ref string) error {
	return e.removeImage(ctx, ref, true)
}

// RemoveImageIfUnused deletes a local image by name or id unless a
// container, running or stopped, was made from it: that is an error, and
// the image stays. An image that is already gone is not an error.
func (e *Engine) RemoveImageIfUnused(ctx context.Context, ref string) error {
	return e.removeImage(ctx, ref, false)
}

func (e *Engine) removeImage(ctx context.Context, ref string, force bool) error {
	_, err := e.cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: force, PruneChildren: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return engineErr("remove image", err)
	}
	return nil
}

// ImportImage makes a local image named ref from rootfs, a tar stream of a
// root file system, with changes (Dockerfile instructions: USER, ENV,
// LABEL, WORKDIR, CMD) applied and comment as its history. When reading
// rootfs fails, the engine discards what it received and tags nothing.
func (e *Engine) ImportImage(ctx context.Context, rootfs io.Reader, ref string, changes []string, comment string) error {
	resp, err := e.cli.ImageImport(ctx, image.ImportSource{Source: rootfs, SourceName: "-"}, ref,
		image.ImportOptions{Changes: changes, Message: comment})
	if err != nil {
		return fmt.Errorf("import %s: %w", ref, err)
	}
	defer resp.Close()
	if err := readImportStream(resp); err != nil {
		return fmt.Errorf("import %s: %w", ref, err)
	}
	return nil
}

// readImportStream drains the engine's JSON progress stream of an import
// and returns the first error message in it.
func readImportStream(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read import response: %w", err)
		}
		if msg.ErrorDetail.Message != "" {
			return errors.New(msg.ErrorDetail.Message)
		}
		if msg.Error != "" {
			return errors.New(msg.Error)
		}
	}
}

// InspectImage describes a local image; see [Engine.InspectImage].
func (p *Provider) InspectImage(ctx context.Context, ref string) (sandbox.Image, bool, error) {
	return p.eng.InspectImage(ctx, ref)
}

// Images lists local images by label; see [Engine.Images].
func (p *Provider) Images(ctx context.Context, labels ...string) ([]sandbox.Image, error) {
	return p.eng.Images(ctx, labels...)
}

// RemoveImage deletes a local image; see [Engine.RemoveImage].
func (p *Provider) RemoveImage(ctx context.Context, ref string) error {
	return p.eng.RemoveImage(ctx, ref)
}

// Commit saves a sandbox's file system (its copy-on-write layer over the
// image it started from) as a local image named ref, with labels, and
// returns the image's id. The sandbox's container configuration (its
// environment holds nothing secret: per-command variables are never part
// of it) carries over; the commands run and their output do not.
func (p *Provider) Commit(ctx context.Context, sb sandbox.Sandbox, ref string, labels map[string]string) (string, error) {
	s, ok := sb.(*Sandbox)
	if !ok {
		return "", invalid("commit", "not a docker sandbox")
	}
	if err := s.usable(); err != nil {
		return "", err
	}
	if err := checkImage("commit", ref); err != nil {
		return "", err
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	changes := []string{"USER " + p.cfg.User, "WORKDIR " + sandbox.WorkDir}
	for _, k := range keys {
		changes = append(changes, fmt.Sprintf("LABEL %q=%q", k, labels[k]))
	}
	resp, err := p.cli.ContainerCommit(ctx, s.id, container.CommitOptions{
		Reference: ref,
		Comment:   "wrench environment snapshot",
		Changes:   changes,
		Pause:     true,
	})
	if err != nil {
		return "", engineErr("commit", err)
	}
	return resp.ID, nil
}

// ShortImageID is an image id without its "sha256:" prefix, cut to 12
// characters, for messages.
func ShortImageID(id string) string {
	return shortID(strings.TrimPrefix(id, "sha256:"))
}

// Changes lists the paths a sandbox added or changed in its root file
// system (over its image), as the engine sees them: directories the
// sandbox's own user cannot read included.
func (p *Provider) Changes(ctx context.Context, sb sandbox.Sandbox) ([]string, error) {
	s, ok := sb.(*Sandbox)
	if !ok {
		return nil, invalid("changes", "not a docker sandbox")
	}
	list, err := p.cli.ContainerDiff(ctx, s.id)
	if err != nil {
		return nil, engineErr("changes", err)
	}
	out := make([]string, 0, len(list))
	for _, c := range list {
		if c.Kind != container.ChangeDelete {
			out = append(out, c.Path)
		}
	}
	sort.Strings(out)
	return out, nil
}
