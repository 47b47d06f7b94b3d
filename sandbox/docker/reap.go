package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/wrenchworks/wrench/sandbox"
)

// ReapOptions tune [Provider.Reap].
type ReapOptions struct {
	// MaxAge, when set, also removes containers of the deployment older
	// than this whoever owns them (a backstop for owners on other hosts,
	// or on this host under a reused pid).
	MaxAge time.Duration
	// DryRun reports what would be removed without removing it.
	DryRun bool
}

// Reap removes the containers of this provider's deployment left behind
// by a process that is gone: created on this host by a pid that no longer
// runs (or by any owner, once older than MaxAge). Containers of live
// processes, this one included, are left alone. It returns the ids
// removed (or, with DryRun, that would be).
func (p *Provider) Reap(ctx context.Context, opts ReapOptions) ([]string, error) {
	list, err := p.cli.ContainerList(ctx, container.ListOptions{
		All: true,
		Filters: filters.NewArgs(
			filters.Arg("label", sandbox.LabelManaged+"=true"),
			filters.Arg("label", sandbox.LabelDeployment+"="+p.cfg.Deployment),
		),
	})
	if err != nil {
		return nil, engineErr("reap", err)
	}
	var reaped []string
	var errs []error
	for _, c := range list {
		if !p.orphan(c.Labels, time.Unix(c.Created, 0), opts.MaxAge) {
			continue
		}
		if !opts.DryRun {
			err := p.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
			if err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("remove %s: %w", shortID(c.ID), err))
				continue
			}
		}
		p.cfg.Logger.Info("reaped orphaned sandbox", "id", shortID(c.ID), "task", c.Labels[sandbox.LabelTask], "owner_pid", c.Labels[sandbox.LabelOwnerPID], "dry_run", opts.DryRun)
		reaped = append(reaped, c.ID)
	}
	if len(errs) > 0 {
		return reaped, engineErr("reap", errors.Join(errs...))
	}
	return reaped, nil
}

// orphan says whether a container with these labels has no live owner.
func (p *Provider) orphan(labels map[string]string, created time.Time, maxAge time.Duration) bool {
	if t, err := time.Parse(time.RFC3339, labels[sandbox.LabelCreated]); err == nil {
		created = t
	}
	if maxAge > 0 && time.Since(created) > maxAge {
		return true
	}
	if labels[sandbox.LabelOwnerHost] != p.host {
		return false
	}
	pid, err := strconv.Atoi(labels[sandbox.LabelOwnerPID])
	if err != nil || pid <= 0 {
		return false
	}
	if pid == os.Getpid() {
		return false
	}
	return !processAlive(pid)
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
