package policy

import (
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// ErrDenied reports a repository the policy does not allow. Callers branch
// on it (errors.As) to answer 403 or comment on an issue.
type ErrDenied struct {
	Repo   string
	Reason string
	// Policy is the policy file, for telling the submitter what to change.
	Policy string
}

func (e *ErrDenied) Error() string {
	msg := fmt.Sprintf("repository %s is not allowed by the server policy", e.Repo)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// HowToAllow says in a sentence how an operator allows the repository.
func (e *ErrDenied) HowToAllow() string {
	where := "the server policy file"
	if e.Policy != "" {
		where = e.Policy
	}
	return fmt.Sprintf("An operator can allow it by adding a rule to %s under `repositories:` such as `- {match: %q, allow: true}` (see docs/environments.md).", where, e.Repo)
}

// Admit checks a task at the edge (API, webhook, CLI) against the rule for
// its repository: the repository must be allowed, and what the task asks
// for (model, image, network, local paths, limits) must be within what the
// policy allows. It returns *ErrDenied for a refused repository and
// *task.ValidationError naming every other field at fault, or nil.
func (p *Policy) Admit(t task.Task) error {
	r := p.For(t.Repo.URL)
	if r.Allow != nil && !*r.Allow {
		return &ErrDenied{Repo: task.RedactURL(t.Repo.URL), Reason: r.Reason, Policy: p.File}
	}
	var errs []task.FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, task.FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if IsLocal(t.Repo.URL) && !Bool(r.LocalPaths) {
		add("repo.url", "names a path on the server's disk, which this server does not allow (policy: local_paths)")
	}
	if m := t.Model; m != "" {
		if strings.HasPrefix(m, "scripted:") {
			if !Bool(r.ScriptedModels) {
				add("model", "scripted models read files on the server's disk, which this server does not allow (policy: scripted_models)")
			}
		} else if !matchAny(r.Models, m) {
			add("model", "%q is not one of the models this server allows (%s)", m, strings.Join(r.Models, ", "))
		}
	}
	if t.Image != "" && !matchAny(r.Images, t.Image) {
		add("image", "%q is not one of the images this server allows (%s)", t.Image, strings.Join(r.Images, ", "))
	}
	if t.Sandbox.Network == "bridge" && !Bool(r.NetworkBridge) {
		add("sandbox.network", "bridge is not allowed by this server (policy: network_bridge); sandboxes reach the network through the egress proxy")
	}
	c := r.MaxLimits
	over := func(field string, v, limit float64, unit string) {
		if limit > 0 && v > limit {
			add(field, "%g%s is above this server's maximum of %g%s", v, unit, limit, unit)
		}
	}
	over("limits.max_turns", float64(t.Limits.MaxTurns), float64(c.MaxTurns), "")
	over("limits.max_cost_usd", t.Limits.MaxCostUSD, c.MaxCostUSD, " USD")
	over("limits.max_tokens", float64(t.Limits.MaxTokens), float64(c.MaxTokens), "")
	if c.Timeout > 0 && time.Duration(t.Limits.Timeout) > time.Duration(c.Timeout) {
		add("limits.timeout", "%s is above this server's maximum of %s", time.Duration(t.Limits.Timeout), time.Duration(c.Timeout))
	}
	over("sandbox.memory_mb", float64(t.Sandbox.MemoryMB), float64(c.MemoryMB), " MiB")
	over("sandbox.cpus", t.Sandbox.CPUs, c.CPUs, "")
	over("sandbox.pids", float64(t.Sandbox.Pids), float64(c.Pids), "")
	over("sandbox.disk_mb", float64(t.Sandbox.DiskMB), float64(c.DiskMB), " MiB")
	if len(errs) > 0 {
		return &task.ValidationError{Fields: errs}
	}
	return nil
}

// IsLocal reports whether a repository URL names the server's disk: a path
// or a file:// URL.
func IsLocal(repoURL string) bool {
	u := strings.TrimSpace(repoURL)
	if !strings.Contains(u, "://") {
		return true
	}
	p, err := url.Parse(u)
	return err != nil || p.Scheme == "file"
}

func matchAny(globs []string, s string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, s); ok || g == "*" {
			return true
		}
	}
	return false
}
