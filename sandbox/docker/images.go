package docker

import (
	"context"
	"fmt"
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
func (p *Provider) InspectImage(ctx context.Context, ref string) (img sandbox.Image, ok bool, err error) {
	if err := checkImage("inspect image", ref); err != nil {
		return img, false, err
	}
	ii, err := p.cli.ImageInspect(ctx, ref)
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
// any value, or "key=value").
func (p *Provider) Images(ctx context.Context, labels ...string) ([]sandbox.Image, error) {
	f := filters.NewArgs()
	for _, l := range labels {
		f.Add("label", l)
	}
	list, err := p.cli.ImageList(ctx, image.ListOptions{Filters: f})
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

// RemoveImage deletes a local image by name or id (its tags too). An image
// that is already gone is not an error; one a container still uses is.
func (p *Provider) RemoveImage(ctx context.Context, ref string) error {
	_, err := p.cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return engineErr("remove image", err)
	}
	return nil
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
