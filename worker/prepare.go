package worker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/wrenchworks/wrench/environment"
	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/repoconfig"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/workspace"
)

// configure resolves the task's commit and reads the repository's
// `.wrench.yaml` under the server policy into the configuration the task
// runs with. The source stays open (Prepare needs it); the caller closes
// it.
func (r *taskRun) configure(ctx context.Context) (Source, *policy.Effective, error) {
	var src Source
	err := r.phase("clone", &r.timings.Clone, func() (err error) {
		src, err = r.w.cfg.Sources.Resolve(workspace.WithProgress(ctx, r.progress("clone")), r.t.Repo)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("clone: %w", err)
	}
	file, err := readRepoConfig(src)
	if err == nil {
		var eff *policy.Effective
		eff, err = r.w.cfg.Policy.Resolve(r.t, file)
		if err == nil {
			return src, eff, nil
		}
	}
	src.Close()
	return nil, nil, &InputError{Err: err}
}

// readRepoConfig reads and parses the commit's `.wrench.yaml`; nil when it
// has none.
func readRepoConfig(src Source) (*repoconfig.File, error) {
	data, err := src.ReadFile(repoconfig.FileName, repoconfig.MaxFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &repoconfig.Error{Problem: err.Error()}
	}
	return repoconfig.Parse(data)
}

// prepare readies the task's sandbox on its repository's environment.
func (r *taskRun) prepare(ctx context.Context, src Source, eff *policy.Effective) (*environment.Prepared, error) {
	secrets, err := r.w.cfg.Policy.SecretValues(r.t.Repo.URL, r.w.cfg.Getenv)
	if err != nil {
		return nil, fmt.Errorf("environment: %w", err) // the deployment's: a secret it names is missing
	}
	r.secrets = secrets
	var p *environment.Prepared
	err = r.phase("sandbox", &r.timings.Setup, func() (err error) {
		p, err = r.w.cfg.Environments.Prepare(ctx, environment.Request{
			TaskID:  r.t.ID,
			RepoURL: r.t.Repo.URL,
			Source:  src,
			Config:  eff,
			Secrets: secrets,
			Clone: func(ctx context.Context) (environment.Clone, error) {
				return src.Clone(ctx, r.t.ID)
			},
			Spec:   r.sandboxSpec(eff),
			Events: r.emit,
		})
		return err
	})
	return p, err
}

// sandboxSpec is the agent phase's sandbox: the effective limits.
func (r *taskRun) sandboxSpec(eff *policy.Effective) sandbox.Spec {
	s := eff.Sandbox
	return sandbox.Spec{
		TaskID:      r.t.ID,
		Network:     s.Network,
		MemoryBytes: s.MemoryMB << 20,
		NanoCPUs:    int64(s.CPUs * 1e9),
		Pids:        s.Pids,
		DiskBytes:   s.DiskMB << 20,
		Timeout:     time.Duration(eff.Limits.Timeout) + time.Minute,
		Runtime:     r.w.cfg.Runtime,
	}
}
