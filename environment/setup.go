package environment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
	"github.com/wrenchworks/wrench/workspace"
)

// setupMargin is how much longer a setup sandbox may live than its setup
// timeout, for sealing and saving.
const setupMargin = 5 * time.Minute

// build runs setup for req in a fresh sandbox on the base image and saves
// the result as the snapshot of key. run collects the setup's outcome.
func (b *Builder) build(ctx context.Context, req Request, base sandbox.Image, key string, run *task.SetupRun, emit func(task.Event)) (Snapshot, error) {
	start := time.Now()
	defer func() { run.Duration = time.Since(start) }()
	clone, err := req.Clone(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("clone: %w", err)
	}
	defer clone.Close()
	sb, egressDone, err := b.startSetup(ctx, req, base, clone)
	if err != nil {
		return Snapshot{}, err
	}
	defer func() {
		sb.Close(context.WithoutCancel(ctx))
		if egressDone != nil {
			run.Egress = egressDone()
		}
	}()
	ws, wsOK := sb.(Workspace)
	sealer, sealOK := sb.(Sealer)
	if !wsOK || !sealOK {
		return Snapshot{}, errors.New("environment: the sandbox backend does not hold workspaces")
	}
	root := isRoot(req)
	var owner *workspace.Owner
	if root {
		owner = &b.cfg.Owner
	}
	if _, err := ws.OpenWorkspace(ctx, owner); err != nil {
		return Snapshot{}, fmt.Errorf("open workspace: %w", err)
	}
	if err := b.runSetup(ctx, req, sb, run, emit); err != nil {
		return Snapshot{}, err
	}
	if err := b.finishSetup(ctx, req, sb, sealer, root, emit); err != nil {
		return Snapshot{}, err
	}
	labels := map[string]string{
		LabelKey: key, LabelRepo: task.RedactURL(req.RepoURL), LabelCommit: req.Source.Hash(),
		LabelBase: base.ID, LabelBaseImage: req.Config.Image, sandbox.LabelDeployment: b.cfg.Store.Deployment(),
	}
	id, err := b.cfg.Snapshots.Commit(ctx, sb, b.cfg.Store.Ref(key), labels)
	if err != nil {
		return Snapshot{}, fmt.Errorf("save snapshot: %w", err)
	}
	emit(task.Event{Text: fmt.Sprintf("snapshot saved %s (%s, setup %s)", key[:16], b.cfg.Store.Ref(key), time.Since(start).Round(time.Millisecond))})
	return Snapshot{Key: key, Image: b.cfg.Store.Ref(key), ImageID: id, Repo: labels[LabelRepo], Commit: req.Source.Hash(), Base: req.Config.Image, Created: time.Now()}, nil
}

func isRoot(req Request) bool {
	return len(req.Config.Packages) > 0 || req.Config.SetupUser == "root"
}

// startSetup starts the setup sandbox on the base image with the clone
// copied in, and its egress session.
func (b *Builder) startSetup(ctx context.Context, req Request, base sandbox.Image, clone Clone) (sandbox.Sandbox, func() []task.EgressSummary, error) {
	spec := req.Spec
	spec.Image, spec.WritableRoot, spec.Root = base.ID, true, isRoot(req)
	spec.Timeout = req.Config.SetupTimeout + setupMargin
	spec.Env = mergeEnv(req.Config.Env, spec.Env)
	spec.Labels = mergeEnv(spec.Labels, map[string]string{"dev.wrench.phase": "setup"})
	var done func() []task.EgressSummary
	if b.cfg.Egress != nil {
		dir, d, err := b.cfg.Egress.Open(ctx, req.TaskID, "setup", req.Config.SetupEgress, req.Events)
		if err != nil {
			return nil, nil, err
		}
		spec.EgressDir, done = dir, d
	}
	pr, pw := io.Pipe()
	exported := make(chan error, 1)
	go func() {
		err := clone.Export(ctx, pw, b.cfg.Owner)
		pw.CloseWithError(err)
		exported <- err
	}()
	spec.Tree = pr
	sb, err := b.cfg.Sandboxes.Start(ctx, spec)
	pr.CloseWithError(errors.New("sandbox started")) // unblocks the exporter if Start stopped reading
	if xerr := <-exported; err == nil && xerr != nil {
		sb.Close(context.WithoutCancel(ctx))
		err = fmt.Errorf("copy the workspace into the setup sandbox: %w", xerr)
	}
	if err != nil {
		if done != nil {
			done()
		}
		return nil, nil, err
	}
	return sb, done, nil
}

// runSetup installs the packages and runs the setup commands, each with
// what is left of the setup timeout; the first failure ends it.
func (b *Builder) runSetup(ctx context.Context, req Request, sb sandbox.Sandbox, run *task.SetupRun, emit func(task.Event)) error {
	cfg := req.Config
	type step struct{ cmd, user string }
	var steps []step
	if len(cfg.Packages) > 0 {
		steps = append(steps, step{"apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends " + strings.Join(cfg.Packages, " "), "root"})
	}
	cmds := cfg.Setup
	if len(cmds) == 0 {
		cmds = autoSetup(req.Source.Files())
	}
	user := ""
	if cfg.SetupUser == "root" {
		user = "root"
	}
	for _, c := range cmds {
		steps = append(steps, step{c, user})
	}
	deadline := time.Now().Add(cfg.SetupTimeout)
	var out strings.Builder
	run.Passed = true
	for i, s := range steps {
		run.Commands = append(run.Commands, s.cmd)
		emit(task.Event{Text: fmt.Sprintf("setup [%d/%d] %s", i+1, len(steps), s.cmd)})
		left := time.Until(deadline)
		if left <= 0 {
			run.Passed, run.TimedOut, run.ExitCode = false, true, -1
			break
		}
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: s.cmd, Timeout: left, MaxOutput: 256 << 10, Env: req.Secrets, User: s.user})
		if err != nil {
			return fmt.Errorf("setup: %w", err)
		}
		fmt.Fprintf(&out, "$ %s\n%s", s.cmd, res.Output)
		emit(task.Event{Text: tail(string(res.Output)), IsError: res.ExitCode != 0 || res.TimedOut})
		run.ExitCode = res.ExitCode
		if res.TimedOut {
			run.Passed, run.TimedOut = false, true
			fmt.Fprintf(&out, "\n[setup timed out after %s]\n", cfg.SetupTimeout)
			break
		}
		if res.ExitCode != 0 {
			run.Passed = false
			break
		}
	}
	run.Output = redactAll(tail(out.String()), req.Secrets)
	if !run.Passed {
		return &SetupError{Run: run}
	}
	for _, c := range warmSteps(req.Source.Files()) {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		emit(task.Event{Text: "warming caches: " + c})
		if _, err := sb.Exec(ctx, sandbox.ExecRequest{Command: c, Timeout: left, Env: req.Secrets, User: user}); err != nil {
			return fmt.Errorf("setup: %w", err)
		}
	}
	return nil
}

// finishSetup hands what a root setup made back to the sandbox user,
// scrubs secret values from every file setup changed, and seals the tree.
func (b *Builder) finishSetup(ctx context.Context, req Request, sb sandbox.Sandbox, sealer Sealer, root bool, emit func(task.Event)) error {
	if root {
		owner := fmt.Sprintf("%d:%d", b.cfg.Owner.UID, b.cfg.Owner.GID)
		res, err := sb.Exec(ctx, sandbox.ExecRequest{User: "root", Timeout: 10 * time.Minute,
			Command: "chown -R " + owner + " /workspace /.wrench/state \"$HOME\""})
		if err != nil {
			return fmt.Errorf("setup: hand the workspace back: %w", err)
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("setup: hand the workspace back: %s", res.Output)
		}
	}
	if len(req.Secrets) > 0 {
		changed, err := b.cfg.Snapshots.Changes(ctx, sb)
		if err != nil {
			return fmt.Errorf("setup: list changed files: %w", err)
		}
		var paths []string
		for _, p := range changed {
			if !inTmp(p) {
				paths = append(paths, p)
			}
		}
		values := make([]string, 0, len(req.Secrets))
		for _, v := range req.Secrets {
			values = append(values, v)
		}
		scrubbed, err := sealer.Scrub(ctx, paths, values)
		if err != nil {
			return fmt.Errorf("setup: scrub secrets: %w", err)
		}
		if len(scrubbed) > 0 {
			emit(task.Event{Text: "secret values removed from " + strings.Join(scrubbed, ", ") + " before saving the snapshot"})
		}
	}
	rep, err := sealer.Seal(ctx)
	if err != nil {
		return fmt.Errorf("setup: seal the workspace: %w", err)
	}
	if len(rep.Restored) > 0 {
		emit(task.Event{Text: "setup changed tracked files, restored as committed: " + strings.Join(rep.Restored, ", ")})
	}
	if len(rep.Ignored) > 0 {
		emit(task.Event{Text: "setup made untracked paths, kept as the environment's (never in a patch): " + strings.Join(rep.Ignored, ", ")})
	}
	return nil
}

// redactAll replaces secret values in s.
func redactAll(s string, secrets map[string]string) string {
	for _, v := range secrets {
		if v != "" {
			s = strings.ReplaceAll(s, v, "[REDACTED]")
		}
	}
	return s
}
