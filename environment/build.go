package environment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/pool"
	"github.com/wrenchworks/wrench/task"
	"github.com/wrenchworks/wrench/workspace"
)

// Workspace is what a sandbox must offer for its git workspace to be
// prepared: open it, receive objects, and move it to a commit.
type Workspace interface {
	OpenWorkspace(ctx context.Context, owner *workspace.Owner) (workspace.Base, error)
	SendPack(ctx context.Context, pack io.Reader) error
	Switch(ctx context.Context, co workspace.Checkout) (workspace.Base, error)
}

// Sealer ends a setup inside its sandbox: secret values scrubbed, the tree
// sealed (see workspace.Workspace.Seal).
type Sealer interface {
	Scrub(ctx context.Context, paths, values []string) ([]string, error)
	Seal(ctx context.Context) (workspace.SealReport, error)
}

// Snapshotter saves a sandbox's file system as an image and lists what it
// changed.
type Snapshotter interface {
	Commit(ctx context.Context, sb sandbox.Sandbox, ref string, labels map[string]string) (string, error)
	Changes(ctx context.Context, sb sandbox.Sandbox) ([]string, error)
}

// Source is a task's commit as the host's mirror holds it
// (workspace.Commit).
type Source interface {
	Hash() string
	Files() map[string]string
	Checkout() workspace.Checkout
	Pack(ctx context.Context, w io.Writer, have []string) (int, error)
}

// Clone is a host-side clone of the task's commit, exported into a setup
// sandbox on a miss (*workspace.Workspace).
type Clone interface {
	Export(ctx context.Context, w io.Writer, owner workspace.Owner) error
	Close() error
}

// Egress opens the worker's egress proxy for one sandbox in a phase
// ("setup" or "agent") with its allowlist (*egress.Sessions): dir is
// mounted in the sandbox (sandbox.Spec.EgressDir), every connection is an
// event, and done closes the proxy and tallies its connections by host.
type Egress interface {
	Open(ctx context.Context, taskID, phase string, allow []string, events func(task.Event)) (dir string, done func() []task.EgressSummary, err error)
	// Assign hands the session in dir (a warm sandbox's) to a task.
	Assign(dir, taskID string, allow []string, events func(task.Event)) error
}

// Config wires a Builder.
type Config struct {
	Sandboxes sandbox.Provider
	Images    ImageStore
	Snapshots Snapshotter
	Store     *Store
	// Egress, when set, gives sandboxes the audited egress proxy; nil
	// leaves them without any network.
	Egress Egress
	// Owner is the sandbox user that owns the workspace.
	Owner workspace.Owner
	// Pool, when set, hands out sandboxes started ahead of time; the
	// Builder keeps it warm with the WarmSnapshots most recently used
	// snapshots.
	Pool          Pool
	WarmSnapshots int
	// MaxBytes is the snapshots' size budget: after saving a new one the
	// least recently used beyond it are removed; 0 keeps every snapshot.
	MaxBytes int64
	Logger   *slog.Logger
}

// Pool hands out sandboxes started ahead of time (*pool.Pool).
type Pool interface {
	Acquire(ctx context.Context, spec sandbox.Spec) (*pool.Lease, error)
	SetImages(images []string)
}

// Builder prepares tasks' sandboxes on their environments.
type Builder struct {
	cfg Config
	log *slog.Logger
}

// NewBuilder returns a Builder.
func NewBuilder(cfg Config) (*Builder, error) {
	if cfg.Sandboxes == nil || cfg.Images == nil || cfg.Snapshots == nil || cfg.Store == nil {
		return nil, errors.New("environment: Sandboxes, Images, Snapshots and Store are required")
	}
	if cfg.Owner == (workspace.Owner{}) {
		cfg.Owner = workspace.Owner{UID: sandbox.UID, GID: sandbox.GID}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Builder{cfg: cfg, log: log}, nil
}

// Request is one task's environment to prepare.
type Request struct {
	TaskID  string
	RepoURL string
	Source  Source
	Config  *policy.Effective
	// Secrets are given to setup commands as environment variables.
	Secrets map[string]string
	// Clone makes the host clone a miss needs.
	Clone func(ctx context.Context) (Clone, error)
	// Spec holds the agent phase's limits, lifetime and labels; Image,
	// WritableRoot, Tree and EgressDir are the Builder's.
	Spec sandbox.Spec
	// Events receives setup and snapshot events; nil discards them.
	Events func(task.Event)
}

// Prepared is a task's ready sandbox: on its environment, with the
// workspace at the task's commit.
type Prepared struct {
	Sandbox sandbox.Sandbox
	Base    workspace.Base
	Setup   *task.SetupRun
	// Warm says the sandbox came ready from the warm pool.
	Warm    bool
	release func(context.Context) error
	egress  func() []task.EgressSummary
}

// Close removes the sandbox and closes its egress session; it returns the
// agent phase's egress tally.
func (p *Prepared) Close(ctx context.Context) ([]task.EgressSummary, error) {
	release := p.release
	if release == nil {
		release = p.Sandbox.Close
	}
	err := release(ctx)
	var tally []task.EgressSummary
	if p.egress != nil {
		tally = p.egress()
		p.egress = nil
	}
	return tally, err
}

// SetupError is a setup that failed or timed out: the repository's fault,
// never the model's or the infrastructure's.
type SetupError struct {
	Run *task.SetupRun
}

func (e *SetupError) Error() string {
	what := fmt.Sprintf("exited with code %d", e.Run.ExitCode)
	if e.Run.TimedOut {
		what = "timed out"
	}
	msg := task.ReasonSetupFailed + ": setup " + what
	if tail := lastLines(e.Run.Output, 5); tail != "" {
		msg += ": " + tail
	}
	return msg
}

// Prepare returns the task's sandbox: started from its environment's
// snapshot when there is one, else after running setup and saving one.
// Errors are *SetupError (the repository's setup failed), or the sandbox
// backend's typed errors.
func (b *Builder) Prepare(ctx context.Context, req Request) (*Prepared, error) {
	sn, run, err := b.Ensure(ctx, req)
	if err != nil {
		return nil, err
	}
	defer b.warm(context.WithoutCancel(ctx))
	p, err := b.start(ctx, req, sn)
	if err != nil {
		return nil, err
	}
	run.Warm = p.Warm
	p.Setup = run
	return p, nil
}

// Ensure returns the snapshot of the task's environment, building it
// (setup) when there is none; it starts no agent sandbox. Prepare calls
// it first. (`wrench env build` goes through worker.Prebuild, which
// prepares a whole task's sandbox and removes it.)
func (b *Builder) Ensure(ctx context.Context, req Request) (Snapshot, *task.SetupRun, error) {
	emit := func(ev task.Event) {
		if req.Events != nil {
			ev.Kind = task.EventSetup
			req.Events(ev)
		}
	}
	base, ok, err := b.cfg.Images.InspectImage(ctx, req.Config.Image)
	if err != nil {
		return Snapshot{}, nil, err
	}
	if !ok {
		return Snapshot{}, nil, &sandbox.Error{Kind: sandbox.ErrImageMissing, Op: "environment", Err: fmt.Errorf("image %s not found; run `wrench image build`", req.Config.Image)}
	}
	key, manifests := Key(KeyInput{BaseImageID: base.ID, Config: req.Config, Files: req.Source.Files()})
	run := &task.SetupRun{Key: key, Image: b.cfg.Store.Ref(key), Snapshot: task.SnapshotHit, Passed: true}
	sn, hit, err := b.cfg.Store.Lookup(ctx, key)
	if err != nil {
		return Snapshot{}, nil, err
	}
	if !hit {
		unlock, err := b.cfg.Store.Lock(ctx, key)
		if err != nil {
			return Snapshot{}, nil, err
		}
		sn, hit, err = b.cfg.Store.Lookup(ctx, key) // built while we waited?
		if err == nil && !hit {
			emit(task.Event{Text: fmt.Sprintf("snapshot miss %s (manifests: %s): running setup", key[:16], strings.Join(manifests, ", "))})
			run.Snapshot = task.SnapshotMiss
			sn, err = b.build(ctx, req, base, key, run, emit)
		}
		unlock()
		if err != nil {
			return Snapshot{}, nil, err
		}
		if run.Snapshot == task.SnapshotMiss {
			b.prune(ctx, key)
		}
	}
	if run.Snapshot == task.SnapshotHit {
		emit(task.Event{Text: "snapshot hit " + key[:16]})
	}
	if err := b.cfg.Store.Touch(key, time.Now()); err != nil {
		b.log.WarnContext(ctx, "record environment use", "key", key, "err", err)
	}
	return sn, run, nil
}

// prune keeps the snapshots within Config.MaxBytes after a new one is
// saved; a failure is logged, never the task's.
func (b *Builder) prune(ctx context.Context, keep string) {
	if b.cfg.MaxBytes <= 0 {
		return
	}
	removed, err := b.cfg.Store.Prune(context.WithoutCancel(ctx), PruneOptions{MaxBytes: b.cfg.MaxBytes, Keep: map[string]bool{keep: true}})
	for _, sn := range removed {
		b.log.InfoContext(ctx, "environment snapshot pruned", "key", sn.Key, "image", sn.Image, "repo", sn.Repo, "last_used", sn.LastUsed)
	}
	if err != nil {
		b.log.WarnContext(ctx, "prune environment snapshots", "err", err)
	}
}

// start runs the agent phase's sandbox from a snapshot (a warm one when
// the pool has it) and moves its workspace to the task's commit.
func (b *Builder) start(ctx context.Context, req Request, sn Snapshot) (*Prepared, error) {
	spec := req.Spec
	spec.Image, spec.WritableRoot, spec.Root, spec.Tree = sn.ImageID, true, false, nil
	spec.Env = mergeEnv(req.Config.Env, spec.Env)
	p, err := b.startAgent(ctx, req, spec)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Prepared, error) {
		p.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	ws, ok := p.Sandbox.(Workspace)
	if !ok {
		return fail(errors.New("environment: the sandbox backend does not hold workspaces"))
	}
	base, err := ws.OpenWorkspace(ctx, nil)
	if err != nil {
		return fail(fmt.Errorf("open workspace: %w", err))
	}
	want := req.Source.Checkout()
	if base.Commit != want.Commit || base.Checkout != want {
		if base.Commit != want.Commit {
			pr, pw := io.Pipe()
			go func() {
				_, err := req.Source.Pack(ctx, pw, []string{base.Commit})
				pw.CloseWithError(err)
			}()
			err := ws.SendPack(ctx, pr)
			pr.CloseWithError(err) // unblocks the packer if the send failed
			if err != nil {
				return fail(fmt.Errorf("send the task's commit: %w", err))
			}
		}
		if base, err = ws.Switch(ctx, want); err != nil {
			return fail(fmt.Errorf("check out %s: %w", want.Commit, err))
		}
	}
	p.Base = base
	return p, nil
}

// startAgent starts the agent phase's sandbox: from the warm pool when
// there is one (its egress session, opened when the pool started it, is
// handed to the task), else with an egress session for the task.
func (b *Builder) startAgent(ctx context.Context, req Request, spec sandbox.Spec) (*Prepared, error) {
	if b.cfg.Pool != nil {
		lease, err := b.cfg.Pool.Acquire(ctx, spec)
		if err != nil {
			return nil, err
		}
		p := &Prepared{Sandbox: lease.Sandbox, release: lease.Release, Warm: lease.Warm}
		if s, ok := lease.Sandbox.(interface{ Spec() sandbox.Spec }); ok && b.cfg.Egress != nil && s.Spec().EgressDir != "" {
			if err := b.cfg.Egress.Assign(s.Spec().EgressDir, req.TaskID, req.Config.AgentEgress, req.Events); err != nil {
				p.Close(context.WithoutCancel(ctx))
				return nil, err
			}
		}
		return p, nil
	}
	p := &Prepared{}
	if b.cfg.Egress != nil {
		dir, done, err := b.cfg.Egress.Open(ctx, req.TaskID, "agent", req.Config.AgentEgress, req.Events)
		if err != nil {
			return nil, err
		}
		spec.EgressDir, p.egress = dir, done
	}
	sb, err := b.cfg.Sandboxes.Start(ctx, spec)
	if err != nil {
		if p.egress != nil {
			p.egress()
		}
		return nil, err
	}
	p.Sandbox, p.release = sb, sb.Close
	return p, nil
}

// warm tells the pool which snapshots to keep ready sandboxes of: the
// most recently used ones, one each.
func (b *Builder) warm(ctx context.Context) {
	if b.cfg.Pool == nil || b.cfg.WarmSnapshots <= 0 {
		return
	}
	list, err := b.cfg.Store.List(ctx)
	if err != nil {
		b.log.Warn("warm pool: list snapshots", "err", err)
		return
	}
	var ids []string
	for i := len(list) - 1; i >= 0 && len(ids) < b.cfg.WarmSnapshots; i-- {
		ids = append(ids, list[i].ImageID)
	}
	b.cfg.Pool.SetImages(ids)
}

// mergeEnv lays over on base.
func mergeEnv(base, over map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, " ⏎ "))
}

// autoSetup is the setup of a repository that names none: a Go module's
// dependencies (and, through its go and toolchain lines, the Go toolchain
// it needs) are downloaded, so its tests can run offline.
func autoSetup(files map[string]string) []string {
	if _, ok := files["go.mod"]; ok {
		return []string{"go mod download"}
	}
	return nil
}

// warmGoCache compiles a Go module's packages and test binaries without
// running a test, so the snapshot's build cache makes the first test run
// of a task as fast as a second one. It is best effort: a module that does
// not compile at this commit (the bug may be just that) still gets its
// snapshot.
const warmGoCache = "go test -count=1 -run '^$' ./... >/dev/null 2>&1 || true"

// warmSteps are the best-effort steps after setup.
func warmSteps(files map[string]string) []string {
	if _, ok := files["go.mod"]; ok {
		return []string{warmGoCache}
	}
	return nil
}

// tailBytes keeps the end of a setup's output.
const tailBytes = 16 << 10

func tail(s string) string {
	if len(s) <= tailBytes {
		return s
	}
	return "[…]\n" + s[len(s)-tailBytes:]
}

// inTmp reports whether a changed path is under a tmpfs the snapshot does
// not keep.
func inTmp(p string) bool {
	return p == "/tmp" || strings.HasPrefix(p, "/tmp/") || strings.HasPrefix(p, "/proc/") || strings.HasPrefix(p, "/dev/") || path.Dir(p) == "/.wrench/run"
}
