package reaper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/workspace"
)

// Containers is the part of the Docker client the reaper uses.
type Containers interface {
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error
}

// Workspaces lists and removes this deployment's git workspaces.
type Workspaces interface {
	// List returns this deployment's workspaces, and directories with no
	// readable label (Deployment "").
	List() ([]workspace.Info, error)
	// Remove deletes one workspace listed by List.
	Remove(workspace.Info) error
}

var (
	_ Containers = (*client.Client)(nil)
	_ Workspaces = (*workspace.Manager)(nil)
)

// Defaults for the zero values of Config.
const (
	DefaultInterval = time.Minute
	DefaultGrace    = time.Minute
	DefaultMaxAge   = 24 * time.Hour
)

// Config configures a Reaper. Deployment is required; Docker and
// Workspaces may each be nil to skip that kind of resource.
type Config struct {
	// Docker lists and removes containers.
	Docker Containers
	// Workspaces lists and removes workspaces.
	Workspaces Workspaces
	// Deployment scopes the reaper: only resources labelled with it are
	// touched.
	Deployment string
	// Alive reports whether a task is still being worked on (by this
	// process or, if the caller knows, anywhere). Nil means "not known",
	// and only the owner-process rules apply.
	Alive func(taskID string) bool
	// Interval is how often Run sweeps; 0 means DefaultInterval.
	Interval time.Duration
	// MaxAge removes a resource of a task that is not alive, whoever owns
	// it, once it is this old; 0 means DefaultMaxAge, negative disables.
	// Keep it above the longest task timeout.
	MaxAge time.Duration
	// Grace is how old a resource of this process, or an unlabelled
	// workspace directory, must be before it is removed; 0 means
	// DefaultGrace.
	Grace time.Duration
	// DryRun reports what would be removed without removing it.
	DryRun bool
	// Logger receives one line per removal; nil discards.
	Logger *slog.Logger

	// Host and PID identify this process; zero values mean os.Hostname()
	// and os.Getpid(). Tests set them.
	Host string
	PID  int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Proc tells whether a pid on this host runs and when it started; nil
	// means the operating system's process table.
	Proc func(pid int) (running bool, started time.Time)
}

// Reaper finds and removes orphaned containers and workspaces. Its methods
// are safe for concurrent use.
type Reaper struct {
	cfg Config
}

// Removed is one resource a sweep removed (or, with DryRun, would have).
type Removed struct {
	// ID is the container id, or the workspace directory.
	ID     string
	TaskID string
	Reason string
}

// Report is what one sweep did.
type Report struct {
	Containers []Removed
	Workspaces []Removed
	// Kept counts the resources of this deployment left in place.
	Kept int
}

// New returns a Reaper for cfg. It fails when Deployment is empty.
func New(cfg Config) (*Reaper, error) {
	if cfg.Deployment == "" {
		return nil, errors.New("reaper: Deployment is required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Host == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("reaper: host name: %w", err)
		}
		cfg.Host = h
	}
	if cfg.PID == 0 {
		cfg.PID = os.Getpid()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Proc == nil {
		cfg.Proc = processInfo
	}
	return &Reaper{cfg: cfg}, nil
}

// Run sweeps every Interval until ctx is done, logging failures (the next
// sweep retries them). Call Sweep first for a sweep at start-up. It
// returns when ctx is done.
func (r *Reaper) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := r.Sweep(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("reaper sweep failed", "err", err)
		}
	}
}

// Sweep removes this deployment's orphaned containers, then its orphaned
// workspaces. It carries on past individual failures and returns them
// joined, with the report of what it did remove.
func (r *Reaper) Sweep(ctx context.Context) (Report, error) {
	var rep Report
	var errs []error
	if r.cfg.Docker != nil {
		if err := r.sweepContainers(ctx, &rep); err != nil {
			errs = append(errs, err)
		}
	}
	if r.cfg.Workspaces != nil {
		if err := r.sweepWorkspaces(&rep); err != nil {
			errs = append(errs, err)
		}
	}
	return rep, errors.Join(errs...)
}

func (r *Reaper) sweepContainers(ctx context.Context, rep *Report) error {
	list, err := r.cfg.Docker.ContainerList(ctx, container.ListOptions{
		All: true,
		Filters: filters.NewArgs(
			filters.Arg("label", sandbox.LabelManaged+"=true"),
			filters.Arg("label", sandbox.LabelDeployment+"="+r.cfg.Deployment),
		),
	})
	if err != nil {
		return &sandbox.Error{Kind: sandbox.ErrUnavailable, Op: "reap: list containers", Err: err}
	}
	var errs []error
	for _, c := range list {
		created := time.Unix(c.Created, 0)
		if t, err := time.Parse(time.RFC3339, c.Labels[sandbox.LabelCreated]); err == nil {
			created = t
		}
		o := owner{
			task:    c.Labels[sandbox.LabelTask],
			host:    c.Labels[sandbox.LabelOwnerHost],
			pid:     atoi(c.Labels[sandbox.LabelOwnerPID]),
			created: created,
		}
		reason, orphan := r.orphan(o)
		if !orphan {
			rep.Kept++
			continue
		}
		if !r.cfg.DryRun {
			err := r.cfg.Docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
			if err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("reap container %s: %w", short(c.ID), err))
				continue
			}
		}
		r.cfg.Logger.Info("reaped container", "id", short(c.ID), "task", o.task, "reason", reason, "dry_run", r.cfg.DryRun)
		rep.Containers = append(rep.Containers, Removed{ID: c.ID, TaskID: o.task, Reason: reason})
	}
	return errors.Join(errs...)
}

func (r *Reaper) sweepWorkspaces(rep *Report) error {
	list, err := r.cfg.Workspaces.List()
	if err != nil {
		return fmt.Errorf("reap: %w", err)
	}
	var errs []error
	for _, w := range list {
		var (
			reason string
			orphan bool
		)
		if w.Deployment == "" {
			// A directory left before it was labelled: nobody can own it
			// for long.
			if age := r.cfg.Now().Sub(w.Created); age > r.cfg.Grace {
				reason, orphan = "unlabelled for "+age.Round(time.Second).String(), true
			}
		} else if w.Deployment == r.cfg.Deployment {
			reason, orphan = r.orphan(owner{task: w.TaskID, host: w.OwnerHost, pid: w.OwnerPID, created: w.Created})
		}
		if !orphan {
			rep.Kept++
			continue
		}
		if !r.cfg.DryRun {
			if err := r.cfg.Workspaces.Remove(w); err != nil {
				errs = append(errs, fmt.Errorf("reap workspace %s: %w", w.Dir, err))
				continue
			}
		}
		r.cfg.Logger.Info("reaped workspace", "dir", w.Dir, "task", w.TaskID, "reason", reason, "dry_run", r.cfg.DryRun)
		rep.Workspaces = append(rep.Workspaces, Removed{ID: w.Dir, TaskID: w.TaskID, Reason: reason})
	}
	return errors.Join(errs...)
}

// owner is who made a resource, from its labels.
type owner struct {
	task    string
	host    string
	pid     int
	created time.Time
}

// orphan decides whether a resource is to be removed, and why.
func (r *Reaper) orphan(o owner) (reason string, orphan bool) {
	if r.cfg.Alive != nil && o.task != "" && r.cfg.Alive(o.task) {
		return "", false
	}
	age := r.cfg.Now().Sub(o.created)
	if r.cfg.MaxAge > 0 && age > r.cfg.MaxAge {
		return "older than " + r.cfg.MaxAge.String(), true
	}
	if o.host != r.cfg.Host || o.pid <= 0 {
		return "", false // another host's, or unknown owner: MaxAge decides
	}
	if o.pid == r.cfg.PID {
		if r.cfg.Alive != nil && age > r.cfg.Grace {
			return "task no longer running in this process", true
		}
		return "", false
	}
	running, started := r.cfg.Proc(o.pid)
	switch {
	case !running:
		return fmt.Sprintf("owner pid %d is gone", o.pid), true
	case !started.IsZero() && started.After(o.created.Add(time.Second)):
		// Labels have one-second resolution; a process that started
		// clearly later cannot have made the resource.
		return fmt.Sprintf("owner pid %d was reused", o.pid), true
	}
	return "", false
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}

func short(id string) string { return id[:min(12, len(id))] }
