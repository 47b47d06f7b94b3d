package reaper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

// Containers lists and removes the engine's containers (*docker.Engine).
type Containers interface {
	// Containers lists the containers, running or not, that carry every
	// one of labels ("key=value").
	Containers(ctx context.Context, labels ...string) ([]sandbox.Container, error)
	// RemoveContainer stops and removes a container; one already gone is
	// not an error.
	RemoveContainer(ctx context.Context, id string) error
}

// Workspaces lists and removes this deployment's git workspaces
// (*workspace.Manager).
type Workspaces interface {
	// List returns this deployment's workspaces, and directories with no
	// readable label (Deployment "").
	List() ([]sandbox.WorkspaceInfo, error)
	// Remove deletes one workspace listed by List.
	Remove(sandbox.WorkspaceInfo) error
}

// Defaults for the zero values of Config.
const (
	DefaultInterval = time.Minute
	DefaultGrace    = time.Minute
	DefaultMaxAge   = 24 * time.Hour
)

// Why a resource was removed: the cause label of
// wrench_orphans_reaped_total and [Removed.Cause].
const (
	// CauseOwnerGone: its owner process on this host no longer runs.
	CauseOwnerGone = "owner_gone"
	// CauseOwnerZombie: its owner process exited and waits to be reaped by
	// its parent; it does no more work.
	CauseOwnerZombie = "owner_zombie"
	// CausePIDReused: the owner's pid now belongs to another process.
	CausePIDReused = "pid_reused"
	// CauseTaskFinal: its task's state is final.
	CauseTaskFinal = "task_final"
	// CauseRedelivered: its task was delivered again ([Reaper.RemoveTask]).
	CauseRedelivered = "redelivered"
	// CauseNotRunning: made by this process for a task it no longer runs.
	CauseNotRunning = "not_running"
	// CauseMaxAge: older than Config.MaxAge.
	CauseMaxAge = "max_age"
	// CauseUnlabelled: a workspace directory without labels.
	CauseUnlabelled = "unlabelled"
)

// Causes lists every cause, for metrics that pre-create their series.
func Causes() []string {
	return []string{CauseOwnerGone, CauseOwnerZombie, CausePIDReused, CauseTaskFinal, CauseRedelivered, CauseNotRunning, CauseMaxAge, CauseUnlabelled}
}

// Kinds of resources, [Removed.Kind].
const (
	KindContainer = "container"
	KindWorkspace = "workspace"
)

// Process is what the operating system says of a process on this host.
type Process struct {
	// Running is true while the pid exists (a zombie's too).
	Running bool
	// Zombie is true when it exited and waits for its parent to reap it.
	Zombie bool
	// Start is its start time in clock ticks after boot (0: unknown).
	Start uint64
	// Started is its start time (zero: unknown).
	Started time.Time
}

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
	// Final reports whether a task's state is final (its resources are
	// then removed whoever owns them). Nil, or an error, means "not
	// known".
	Final func(ctx context.Context, taskID string) (bool, error)
	// Observe, when set, is called for every resource removed (or, with
	// DryRun, that would be).
	Observe func(Removed)
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

	// Host, PID and Start identify this process; zero values mean
	// os.Hostname(), os.Getpid() and its start time from /proc. Tests set
	// them.
	Host  string
	PID   int
	Start uint64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Proc tells about a pid on this host; nil means the operating
	// system's process table.
	Proc func(pid int) Process
}

// Reaper finds and removes orphaned containers and workspaces. Its methods
// are safe for concurrent use.
type Reaper struct {
	cfg Config
}

// Removed is one resource a sweep removed (or, with DryRun, would have).
type Removed struct {
	// Kind is KindContainer or KindWorkspace.
	Kind string
	// ID is the container id, or the workspace directory.
	ID     string
	TaskID string
	// Cause is one of the Cause constants; Reason says it in words.
	Cause  string
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
		if st, err := sandbox.ReadProcStat(0); err == nil {
			cfg.Start = st.Start
		}
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
		if err := r.sweepWorkspaces(ctx, &rep); err != nil {
			errs = append(errs, err)
		}
	}
	return rep, errors.Join(errs...)
}

func (r *Reaper) sweepContainers(ctx context.Context, rep *Report) error {
	return r.removeContainers(ctx, rep, "", func(o owner) (string, string, bool) { return r.orphan(ctx, o) })
}

// removeContainers removes this deployment's containers (of task, when
// not "") for which decide says so, with its cause and reason.
func (r *Reaper) removeContainers(ctx context.Context, rep *Report, task string, decide func(owner) (cause, reason string, remove bool)) error {
	labels := []string{sandbox.LabelManaged + "=true", sandbox.LabelDeployment + "=" + r.cfg.Deployment}
	if task != "" {
		labels = append(labels, sandbox.LabelTask+"="+task)
	}
	list, err := r.cfg.Docker.Containers(ctx, labels...)
	if err != nil {
		return fmt.Errorf("reap: %w", err)
	}
	var errs []error
	for _, c := range list {
		o := containerOwner(c)
		cause, reason, remove := decide(o)
		if !remove {
			rep.Kept++
			continue
		}
		if !r.cfg.DryRun {
			if err := r.cfg.Docker.RemoveContainer(ctx, c.ID); err != nil {
				errs = append(errs, fmt.Errorf("reap container %s: %w", short(c.ID), err))
				continue
			}
		}
		r.cfg.Logger.Info("reaped container", "id", short(c.ID), "task_id", o.task, "cause", cause, "reason", reason, "dry_run", r.cfg.DryRun)
		rep.Containers = append(rep.Containers, r.removed(Removed{Kind: KindContainer, ID: c.ID, TaskID: o.task, Cause: cause, Reason: reason}))
	}
	return errors.Join(errs...)
}

// containerOwner reads who made a container from its labels.
func containerOwner(c sandbox.Container) owner {
	created := c.Created
	if t, err := time.Parse(time.RFC3339, c.Labels[sandbox.LabelCreated]); err == nil {
		created = t
	}
	start, _ := strconv.ParseUint(c.Labels[sandbox.LabelOwnerStart], 10, 64)
	return owner{
		task:    c.Labels[sandbox.LabelTask],
		host:    c.Labels[sandbox.LabelOwnerHost],
		pid:     atoi(c.Labels[sandbox.LabelOwnerPID]),
		start:   start,
		created: created,
	}
}

// removed reports r to Config.Observe and returns it.
func (r *Reaper) removed(rm Removed) Removed {
	if r.cfg.Observe != nil {
		r.cfg.Observe(rm)
	}
	return rm
}

func (r *Reaper) sweepWorkspaces(ctx context.Context, rep *Report) error {
	return r.removeWorkspaces(rep, func(w sandbox.WorkspaceInfo) (string, string, bool) {
		if w.Deployment == "" {
			// A directory left before it was labelled: nobody can own it
			// for long.
			if age := r.cfg.Now().Sub(w.Created); age > r.cfg.Grace {
				return CauseUnlabelled, "unlabelled for " + age.Round(time.Second).String(), true
			}
			return "", "", false
		}
		if w.Deployment != r.cfg.Deployment {
			return "", "", false
		}
		return r.orphan(ctx, owner{task: w.TaskID, host: w.OwnerHost, pid: w.OwnerPID, start: w.OwnerStart, created: w.Created})
	})
}

// removeWorkspaces removes the listed workspaces for which decide says so.
func (r *Reaper) removeWorkspaces(rep *Report, decide func(sandbox.WorkspaceInfo) (cause, reason string, remove bool)) error {
	list, err := r.cfg.Workspaces.List()
	if err != nil {
		return fmt.Errorf("reap: %w", err)
	}
	var errs []error
	for _, w := range list {
		cause, reason, remove := decide(w)
		if !remove {
			rep.Kept++
			continue
		}
		if !r.cfg.DryRun {
			if err := r.cfg.Workspaces.Remove(w); err != nil {
				errs = append(errs, fmt.Errorf("reap workspace %s: %w", w.Dir, err))
				continue
			}
		}
		r.cfg.Logger.Info("reaped workspace", "dir", w.Dir, "task_id", w.TaskID, "cause", cause, "reason", reason, "dry_run", r.cfg.DryRun)
		rep.Workspaces = append(rep.Workspaces, r.removed(Removed{Kind: KindWorkspace, ID: w.Dir, TaskID: w.TaskID, Cause: cause, Reason: reason}))
	}
	return errors.Join(errs...)
}

// RemoveTask removes every container and workspace of this deployment
// labelled with taskID, whoever made them: what earlier attempts of a task
// left, removed when it is delivered again and before the new attempt makes
// its own.
func (r *Reaper) RemoveTask(ctx context.Context, taskID string) (Report, error) {
	var rep Report
	var errs []error
	if taskID == "" {
		return rep, errors.New("reaper: RemoveTask needs a task id")
	}
	decide := func(string) (string, string, bool) {
		return CauseRedelivered, "task " + taskID + " delivered again", true
	}
	if r.cfg.Docker != nil {
		errs = append(errs, r.removeContainers(ctx, &rep, taskID, func(owner) (string, string, bool) { return decide(taskID) }))
	}
	if r.cfg.Workspaces != nil {
		errs = append(errs, r.removeWorkspaces(&rep, func(w sandbox.WorkspaceInfo) (string, string, bool) {
			if w.Deployment != r.cfg.Deployment || w.TaskID != taskID {
				return "", "", false
			}
			return decide(taskID)
		}))
	}
	rep.Kept = 0 // other tasks' resources are not counted here
	return rep, errors.Join(errs...)
}

// owner is who made a resource, from its labels.
type owner struct {
	task    string
	host    string
	pid     int
	start   uint64 // clock ticks after boot; 0 when not labelled
	created time.Time
}

// orphan decides whether a resource is to be removed: its cause and the
// reason in words.
func (r *Reaper) orphan(ctx context.Context, o owner) (cause, reason string, orphan bool) {
	if r.cfg.Alive != nil && o.task != "" && r.cfg.Alive(o.task) {
		return "", "", false
	}
	if r.cfg.Final != nil && o.task != "" {
		if final, err := r.cfg.Final(ctx, o.task); err == nil && final {
			return CauseTaskFinal, "task " + o.task + " is final", true
		}
	}
	age := r.cfg.Now().Sub(o.created)
	if r.cfg.MaxAge > 0 && age > r.cfg.MaxAge {
		return CauseMaxAge, "older than " + r.cfg.MaxAge.String(), true
	}
	if o.host != r.cfg.Host || o.pid <= 0 {
		return "", "", false // another host's, or unknown owner: MaxAge decides
	}
	if o.pid == r.cfg.PID && (o.start == 0 || r.cfg.Start == 0 || o.start == r.cfg.Start) {
		if r.cfg.Alive != nil && age > r.cfg.Grace {
			return CauseNotRunning, "task no longer running in this process", true
		}
		return "", "", false
	}
	return r.ownerGone(o)
}

// ownerGone decides for a resource made on this host by another process
// (or by an earlier process with this one's pid).
func (r *Reaper) ownerGone(o owner) (cause, reason string, gone bool) {
	p := Process{Running: true, Start: r.cfg.Start}
	if o.pid != r.cfg.PID {
		p = r.cfg.Proc(o.pid)
	}
	switch {
	case !p.Running:
		return CauseOwnerGone, fmt.Sprintf("owner pid %d is gone", o.pid), true
	case p.Zombie:
		return CauseOwnerZombie, fmt.Sprintf("owner pid %d is a zombie", o.pid), true
	case o.start != 0 && p.Start != 0 && p.Start != o.start:
		return CausePIDReused, fmt.Sprintf("owner pid %d now belongs to another process (started at tick %d, not %d)", o.pid, p.Start, o.start), true
	case o.start == 0 && !p.Started.IsZero() && p.Started.After(o.created.Add(time.Second)):
		// Without a start label: labels have one-second resolution; a
		// process that started clearly later cannot have made it.
		return CausePIDReused, fmt.Sprintf("owner pid %d was reused", o.pid), true
	}
	return "", "", false
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}

func short(id string) string { return id[:min(12, len(id))] }
