// Package policy is the server's say over what tasks may do: which
// repositories may run at all, the default and maximum limits, the test
// command of a repository that has no `.wrench.yaml`, which egress hosts may
// ever be opened, which models a client may ask for, whether tasks may name
// paths on the server's disk, and the secrets available to setup.
//
// A policy file (`--policy FILE` on serve, worker and run) holds defaults
// and an ordered list of repository rules; the first rule whose pattern
// matches a task's repository URL applies, field by field, over the
// defaults. Without a file, [Default] applies. The schema is documented in
// docs/environments.md.
//
// The server's caps always win: the repository's file may ask for values up
// to the caps (larger ones are lowered to the cap), and a task's JSON may
// narrow but never widen ([Policy.Admit] refuses a task that asks for more
// than the policy allows, naming the field).
package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Limits are resource and spend limits; a zero field is "not set".
type Limits struct {
	MaxTurns     int      `yaml:"max_turns,omitempty" json:"max_turns,omitempty"`
	MaxCostUSD   float64  `yaml:"max_cost_usd,omitempty" json:"max_cost_usd,omitempty"`
	MaxTokens    int64    `yaml:"max_tokens,omitempty" json:"max_tokens,omitempty"`
	Timeout      Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	MemoryMB     int64    `yaml:"memory_mb,omitempty" json:"memory_mb,omitempty"`
	CPUs         float64  `yaml:"cpus,omitempty" json:"cpus,omitempty"`
	Pids         int64    `yaml:"pids,omitempty" json:"pids,omitempty"`
	DiskMB       int64    `yaml:"disk_mb,omitempty" json:"disk_mb,omitempty"`
	SetupTimeout Duration `yaml:"setup_timeout,omitempty" json:"setup_timeout,omitempty"`
	TestTimeout  Duration `yaml:"test_timeout,omitempty" json:"test_timeout,omitempty"`
}

// Egress says which hosts sandboxes may reach through the worker's egress
// proxy. Patterns are host names ("pypi.org"), optionally with a port, or
// "*." and a domain ("*.pythonhosted.org"); "*" alone matches every host.
type Egress struct {
	// Setup are the hosts every setup may reach (the ecosystems' registries).
	Setup []string `yaml:"setup,omitempty" json:"setup,omitempty"`
	// Agent are the hosts every agent phase may reach (default: none).
	Agent []string `yaml:"agent,omitempty" json:"agent,omitempty"`
	// Allow bounds what a repository's `.wrench.yaml` may add to setup's
	// hosts (its egress field).
	Allow []string `yaml:"allow,omitempty" json:"allow,omitempty"`
	// AllowAgent bounds what a repository's `.wrench.yaml` may add to the
	// agent phase's hosts (its agent_egress field); default none.
	AllowAgent []string `yaml:"allow_agent,omitempty" json:"allow_agent,omitempty"`
}

// Secret is a value given to setup commands as an environment variable,
// read from the worker's environment or a file. It never reaches the agent
// phase, a snapshot, a log line, a result or a trajectory.
type Secret struct {
	// Env is the worker's environment variable holding the value.
	Env string `yaml:"env,omitempty" json:"env,omitempty"`
	// File is a file holding the value (trailing newline removed).
	File string `yaml:"file,omitempty" json:"file,omitempty"`
}

// Rule is the policy for the repositories it matches. Unset fields fall
// back to the defaults.
type Rule struct {
	// Match is a URL pattern where "*" matches any run of characters
	// ("https://github.com/acme/*"); only repository rules have one.
	Match string `yaml:"match,omitempty" json:"match,omitempty"`
	// Allow says whether tasks on these repositories run at all.
	Allow *bool `yaml:"allow,omitempty" json:"allow,omitempty"`
	// Reason is shown to whoever submits a task that Allow refuses.
	Reason string `yaml:"reason,omitempty" json:"reason,omitempty"`
	// Test is the test command for a repository without one.
	Test string `yaml:"test,omitempty" json:"test,omitempty"`
	// Image is the base image of a repository that names none (default
	// wrench-sandbox:default).
	Image string `yaml:"image,omitempty" json:"image,omitempty"`
	// Limits are the defaults; MaxLimits are the caps.
	Limits    Limits `yaml:"limits,omitempty" json:"limits,omitempty"`
	MaxLimits Limits `yaml:"max_limits,omitempty" json:"max_limits,omitempty"`
	Egress    Egress `yaml:"egress,omitempty" json:"egress,omitempty"`
	// Models are glob patterns of model names a client may ask for.
	Models []string `yaml:"models,omitempty" json:"models,omitempty"`
	// ScriptedModels allows "scripted:FILE" models, which read a file on
	// the server's disk.
	ScriptedModels *bool `yaml:"scripted_models,omitempty" json:"scripted_models,omitempty"`
	// LocalPaths allows repository URLs naming the server's disk (paths
	// and file:// URLs).
	LocalPaths *bool `yaml:"local_paths,omitempty" json:"local_paths,omitempty"`
	// NetworkBridge allows a task to ask for `network: bridge` (a real
	// network interface in the sandbox, bypassing the egress proxy).
	NetworkBridge *bool `yaml:"network_bridge,omitempty" json:"network_bridge,omitempty"`
	// SetupRoot allows setup to run as root in a writable root filesystem.
	SetupRoot *bool `yaml:"setup_root,omitempty" json:"setup_root,omitempty"`
	// Images are glob patterns of images a task or repository may name.
	Images []string `yaml:"images,omitempty" json:"images,omitempty"`
	// Secrets are given to setup commands by name.
	Secrets map[string]Secret `yaml:"secrets,omitempty" json:"secrets,omitempty"`
	// Resume lets a redelivered task continue from its last checkpoint.
	Resume *bool `yaml:"resume,omitempty" json:"resume,omitempty"`
	// DraftWithoutTests opens a draft pull request for a result that
	// passed only because there was no test command.
	DraftWithoutTests *bool `yaml:"draft_without_tests,omitempty" json:"draft_without_tests,omitempty"`
	// MaxRunning caps the tasks of one repository running at once across
	// every worker sharing the queue; 0 is no cap. In defaults it applies
	// to each repository on its own.
	MaxRunning int `yaml:"max_running,omitempty" json:"max_running,omitempty"`
	// Budget caps the model spend of each repository the rule matches,
	// per day (see [Policy.BudgetAccounts]).
	Budget Budget `yaml:"budget,omitempty" json:"budget,omitempty"`
}

// Budget is a spend cap above the task: what all the tasks of one
// repository (or tenant) may spend on models in one budget day (a UTC
// date, task.BudgetDay), across every worker of the deployment. A zero
// field is "not set".
type Budget struct {
	// DailyUSD is the cap, in US dollars, priced as the workers price
	// model calls (their --prices table).
	DailyUSD float64 `yaml:"daily_usd,omitempty" json:"daily_usd,omitempty"`
}

// Policy is a server policy: defaults and repository rules.
type Policy struct {
	Defaults     Rule   `yaml:"defaults,omitempty" json:"defaults"`
	Repositories []Rule `yaml:"repositories,omitempty" json:"repositories,omitempty"`
	// Tenants are whom tasks run for (see [Tenant]); a task no tenant
	// claims is [task.DefaultTenant]'s.
	Tenants []Tenant `yaml:"tenants,omitempty" json:"tenants,omitempty"`
	// File is where the policy was read from ("" for the built-in one).
	File string `yaml:"-" json:"file,omitempty"`
}

// Duration is a time.Duration written as "30m" in YAML and JSON.
type Duration time.Duration

// UnmarshalYAML reads "30m".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration such as \"30m\"", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes "30m".
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// MarshalText writes "30m" (JSON uses it too).
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// Error is a policy file that cannot be used.
type Error struct {
	File    string
	Problem string
}

func (e *Error) Error() string {
	if e.File == "" {
		return "policy: " + e.Problem
	}
	return "policy " + e.File + ": " + e.Problem
}

// Load reads a policy file; an empty path returns the built-in default for
// opts.
func Load(file string, opts Options) (*Policy, error) {
	if file == "" {
		return Default(opts), nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, &Error{File: file, Problem: err.Error()}
	}
	p, err := Parse(data, opts)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.File = file
		}
		return nil, err
	}
	p.File = file
	return p, nil
}

var goTypeName = regexp.MustCompile(` (in|into) (type )?[\w.*\[\]]+`)

// Parse decodes a policy strictly (unknown fields are errors) and lays it
// over the built-in default for opts: a field the file leaves unset keeps
// the default's value.
func Parse(data []byte, opts Options) (*Policy, error) {
	var p Policy
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil && !errors.Is(err, io.EOF) {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = strings.ReplaceAll(goTypeName.ReplaceAllString(msg, ""), "unmarshal errors:\n  ", "")
		return nil, &Error{Problem: msg}
	}
	p.Defaults = overlay(Default(opts).Defaults, p.Defaults)
	if p.Defaults.Match != "" {
		return nil, &Error{Problem: "defaults: match belongs in repositories"}
	}
	for i, r := range p.Repositories {
		if r.Match == "" {
			return nil, &Error{Problem: fmt.Sprintf("repositories[%d]: match is required", i)}
		}
	}
	if err := p.check(); err != nil {
		return nil, err
	}
	if err := p.checkTenants(); err != nil {
		return nil, err
	}
	return &p, nil
}

func (p *Policy) check() error {
	rules := append([]Rule{p.Defaults}, p.Repositories...)
	for i, r := range rules {
		where := "defaults"
		if i > 0 {
			where = fmt.Sprintf("repositories[%d]", i-1)
		}
		for _, hosts := range [][]string{r.Egress.Setup, r.Egress.Agent, r.Egress.Allow, r.Egress.AllowAgent} {
			for _, h := range hosts {
				if h != "*" && checkHost(h) != nil {
					return &Error{Problem: fmt.Sprintf("%s.egress: %v", where, checkHost(h))}
				}
			}
		}
		if r.MaxRunning < 0 {
			return &Error{Problem: where + ": max_running must not be negative"}
		}
		if r.Budget.DailyUSD < 0 {
			return &Error{Problem: fmt.Sprintf("%s.budget.daily_usd: %g is negative", where, r.Budget.DailyUSD)}
		}
		for name, s := range r.Secrets {
			if (s.Env == "") == (s.File == "") {
				return &Error{Problem: fmt.Sprintf("%s.secrets.%s: give exactly one of env or file", where, name)}
			}
		}
		for _, g := range append(append([]string{}, r.Models...), r.Images...) {
			if _, err := path.Match(g, ""); err != nil {
				return &Error{Problem: fmt.Sprintf("%s: %q is not a valid pattern", where, g)}
			}
		}
	}
	return nil
}

// For returns the rule that applies to a repository URL: the defaults with
// the first matching repository rule laid over them.
func (p *Policy) For(repoURL string) Rule {
	r := p.Defaults
	for _, rule := range p.Repositories {
		if MatchURL(rule.Match, repoURL) {
			return overlay(r, rule)
		}
	}
	return r
}

// MatchURL reports whether url matches pattern, where "*" matches any run
// of characters (slashes included) and a trailing ".git" or "/" on either
// side is ignored.
func MatchURL(pattern, url string) bool {
	norm := func(s string) string {
		s = strings.TrimSuffix(strings.TrimSuffix(s, "/"), ".git")
		return strings.ToLower(s)
	}
	pattern, url = norm(pattern), norm(url)
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == url
	}
	if !strings.HasPrefix(url, parts[0]) {
		return false
	}
	url = url[len(parts[0]):]
	for i, part := range parts[1:] {
		last := i == len(parts)-2
		if last {
			return strings.HasSuffix(url, part)
		}
		j := strings.Index(url, part)
		if j < 0 {
			return false
		}
		url = url[j+len(part):]
	}
	return true
}

// overlay lays the set fields of top over base.
func overlay(base, top Rule) Rule {
	out := base
	out.Match = top.Match
	if top.Allow != nil {
		out.Allow, out.Reason = top.Allow, top.Reason
	}
	if top.Reason != "" {
		out.Reason = top.Reason
	}
	setString(&out.Test, top.Test)
	setString(&out.Image, top.Image)
	out.Limits = overlayLimits(base.Limits, top.Limits)
	out.MaxLimits = overlayLimits(base.MaxLimits, top.MaxLimits)
	setList(&out.Egress.Setup, top.Egress.Setup)
	setList(&out.Egress.Agent, top.Egress.Agent)
	setList(&out.Egress.Allow, top.Egress.Allow)
	setList(&out.Egress.AllowAgent, top.Egress.AllowAgent)
	setList(&out.Models, top.Models)
	setList(&out.Images, top.Images)
	for _, f := range []struct{ dst, src **bool }{
		{&out.ScriptedModels, &top.ScriptedModels}, {&out.LocalPaths, &top.LocalPaths},
		{&out.NetworkBridge, &top.NetworkBridge}, {&out.SetupRoot, &top.SetupRoot},
		{&out.Resume, &top.Resume}, {&out.DraftWithoutTests, &top.DraftWithoutTests},
	} {
		if *f.src != nil {
			*f.dst = *f.src
		}
	}
	if top.Secrets != nil {
		out.Secrets = top.Secrets
	}
	if top.MaxRunning != 0 {
		out.MaxRunning = top.MaxRunning
	}
	if top.Budget.DailyUSD != 0 {
		out.Budget.DailyUSD = top.Budget.DailyUSD
	}
	return out
}

func overlayLimits(b, t Limits) Limits {
	set := func(dst *int64, v int64) {
		if v != 0 {
			*dst = v
		}
	}
	if t.MaxTurns != 0 {
		b.MaxTurns = t.MaxTurns
	}
	if t.MaxCostUSD != 0 {
		b.MaxCostUSD = t.MaxCostUSD
	}
	if t.CPUs != 0 {
		b.CPUs = t.CPUs
	}
	set(&b.MaxTokens, t.MaxTokens)
	set(&b.MemoryMB, t.MemoryMB)
	set(&b.Pids, t.Pids)
	set(&b.DiskMB, t.DiskMB)
	for _, d := range []struct{ dst, src *Duration }{{&b.Timeout, &t.Timeout}, {&b.SetupTimeout, &t.SetupTimeout}, {&b.TestTimeout, &t.TestTimeout}} {
		if *d.src != 0 {
			*d.dst = *d.src
		}
	}
	return b
}

func setString(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

func setList(dst *[]string, v []string) {
	if v != nil {
		*dst = v
	}
}

// Bool reads an optional flag; nil is false.
func Bool(b *bool) bool { return b != nil && *b }

func ptr[T any](v T) *T { return &v }
