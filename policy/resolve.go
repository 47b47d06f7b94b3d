package policy

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/repoconfig"
	"github.com/wrenchworks/wrench/task"
)

// Effective is the configuration a task runs with: the policy's rule for
// its repository, the repository's `.wrench.yaml` and the task's own
// fields, merged with the server's caps winning. Sources says where each
// value came from.
type Effective struct {
	Image        string              `json:"image"`
	Packages     []string            `json:"packages,omitempty"`
	Setup        []string            `json:"setup,omitempty"`
	SetupUser    string              `json:"setup_user,omitempty"`
	SetupTimeout time.Duration       `json:"setup_timeout_ns"`
	Test         string              `json:"test,omitempty"`
	TestTimeout  time.Duration       `json:"test_timeout_ns"`
	Env          map[string]string   `json:"env,omitempty"`
	SetupEgress  []string            `json:"setup_egress,omitempty"`
	AgentEgress  []string            `json:"agent_egress,omitempty"`
	Limits       task.Limits         `json:"limits"`
	Sandbox      task.SandboxOptions `json:"sandbox"`
	Instructions []string            `json:"instructions,omitempty"`
	Manifests    []string            `json:"manifests,omitempty"`
	// SecretNames are the secrets setup receives (values are never here).
	SecretNames []string `json:"secrets,omitempty"`
	Resume      bool     `json:"resume"`
	// DraftWithoutTests: a result that passed with no test command opens a
	// draft pull request.
	DraftWithoutTests bool `json:"draft_without_tests"`
	// Sources maps a field name to where its value came from: "built-in",
	// "policy defaults", "policy rule <match>", ".wrench.yaml:<line>",
	// "task" or "capped by policy".
	Sources map[string]string `json:"sources"`
	// Notes are adjustments worth telling the user (a value lowered to a
	// cap).
	Notes []string `json:"notes,omitempty"`
}

// Resolve merges a task, its repository's file (nil when the repository
// has none) and the policy into the configuration the task runs with. It
// returns *ErrDenied for a refused repository and *repoconfig.Error for a
// repository file that asks for what the policy forbids (a host outside
// egress.allow, root setup where it is not allowed, an image not allowed).
func (p *Policy) Resolve(t task.Task, file *repoconfig.File) (*Effective, error) {
	r := p.For(t.Repo.URL)
	if r.Allow != nil && !*r.Allow {
		return nil, &ErrDenied{Repo: task.RedactURL(t.Repo.URL), Reason: r.Reason, Policy: p.File}
	}
	if file == nil {
		file = &repoconfig.File{Lines: map[string]int{}}
	}
	rs := &resolver{rule: r, file: file, e: &Effective{Sources: map[string]string{}}}
	rs.ruleSource = "policy defaults"
	if r.Match != "" {
		rs.ruleSource = "policy rule " + r.Match
	}
	if err := rs.resolve(t); err != nil {
		return nil, err
	}
	return rs.e, nil
}

type resolver struct {
	rule       Rule
	ruleSource string
	file       *repoconfig.File
	e          *Effective
}

func (rs *resolver) fileSource(field string) string {
	if n := rs.file.Lines[field]; n > 0 {
		return fmt.Sprintf("%s:%d", repoconfig.FileName, n)
	}
	return repoconfig.FileName
}

// pick sets a string field from the first non-empty of task, file, rule.
func (rs *resolver) pick(name string, dst *string, fromTask, fromFile, fileField, fromRule string) {
	switch {
	case fromTask != "":
		*dst, rs.e.Sources[name] = fromTask, "task"
	case fromFile != "":
		*dst, rs.e.Sources[name] = fromFile, rs.fileSource(fileField)
	case fromRule != "":
		*dst, rs.e.Sources[name] = fromRule, rs.ruleSource
	}
}

func (rs *resolver) resolve(t task.Task) error {
	e, f, r := rs.e, rs.file, rs.rule
	defImage := r.Image
	if defImage == "" {
		defImage = DefaultImage
	}
	rs.pick("image", &e.Image, t.Image, f.Image.Base, "image", defImage)
	if e.Sources["image"] == rs.ruleSource && r.Image == "" {
		e.Sources["image"] = "built-in"
	}
	if !matchAny(r.Images, e.Image) {
		return &repoconfig.Error{Line: f.Lines["image"], Field: "image", Problem: fmt.Sprintf("%q is not one of the images the server policy allows (%s)", e.Image, strings.Join(r.Images, ", "))}
	}
	e.Packages = f.Image.Packages
	if len(e.Packages) > 0 {
		e.Sources["packages"] = rs.fileSource("image")
		if !Bool(r.SetupRoot) {
			return &repoconfig.Error{Line: f.Lines["image"], Field: "image.packages", Problem: "installing Debian packages needs root, which the server policy does not allow (setup_root)"}
		}
	}
	e.Setup = f.Setup
	if len(e.Setup) > 0 {
		e.Sources["setup"] = rs.fileSource("setup")
	}
	e.SetupUser = f.SetupUser
	if e.SetupUser == "root" {
		e.Sources["setup_user"] = rs.fileSource("setup_user")
		if !Bool(r.SetupRoot) {
			return &repoconfig.Error{Line: f.Lines["setup_user"], Field: "setup_user", Problem: "root is not allowed by the server policy (setup_root)"}
		}
	}
	rs.pick("test", &e.Test, t.TestCommand, f.Test, "test", r.Test)
	e.SetupTimeout = rs.duration("setup_timeout", 0, f.SetupTimeout, "setup_timeout", r.Limits.SetupTimeout, r.MaxLimits.SetupTimeout)
	e.TestTimeout = rs.duration("test_timeout", 0, f.TestTimeout, "test_timeout", r.Limits.TestTimeout, r.MaxLimits.TestTimeout)
	e.Env = f.Env
	if len(e.Env) > 0 {
		e.Sources["env"] = rs.fileSource("env")
	}
	if err := rs.egress(); err != nil {
		return err
	}
	rs.limits(t)
	e.Instructions = f.Instructions
	if len(e.Instructions) > 0 {
		e.Sources["instructions"] = rs.fileSource("instructions")
	}
	e.Manifests = f.Manifests
	for name := range r.Secrets {
		e.SecretNames = append(e.SecretNames, name)
	}
	sort.Strings(e.SecretNames)
	e.Resume = Bool(r.Resume)
	e.DraftWithoutTests = Bool(r.DraftWithoutTests)
	return nil
}

// duration picks task, file, then rule; a value over the cap is lowered.
func (rs *resolver) duration(name string, fromTask, fromFile time.Duration, fileField string, fromRule, capv Duration) time.Duration {
	var v time.Duration
	switch {
	case fromTask > 0:
		v, rs.e.Sources[name] = fromTask, "task"
	case fromFile > 0:
		v, rs.e.Sources[name] = fromFile, rs.fileSource(fileField)
	default:
		v, rs.e.Sources[name] = time.Duration(fromRule), rs.ruleSource
	}
	if c := time.Duration(capv); c > 0 && v > c {
		rs.e.Notes = append(rs.e.Notes, fmt.Sprintf("%s %s lowered to the server's maximum %s", name, v, c))
		v, rs.e.Sources[name] = c, "capped by policy"
	}
	return v
}

func (rs *resolver) egress() error {
	e, f, r := rs.e, rs.file, rs.rule
	e.SetupEgress = append([]string(nil), r.Egress.Setup...)
	e.Sources["setup_egress"] = rs.ruleSource
	for i, h := range f.Egress {
		if !MatchHost(r.Egress.Allow, h) && !MatchHost(r.Egress.Setup, h) {
			return &repoconfig.Error{Line: f.Lines["egress"], Field: fmt.Sprintf("egress[%d]", i), Problem: fmt.Sprintf("%s is not allowed by the server policy (egress.allow)", h)}
		}
		e.SetupEgress = append(e.SetupEgress, h)
		e.Sources["setup_egress"] = rs.ruleSource + " + " + rs.fileSource("egress")
	}
	e.AgentEgress = append([]string(nil), r.Egress.Agent...)
	e.Sources["agent_egress"] = rs.ruleSource
	for i, h := range f.AgentEgress {
		if !MatchHost(r.Egress.AllowAgent, h) && !MatchHost(r.Egress.Agent, h) {
			return &repoconfig.Error{Line: f.Lines["agent_egress"], Field: fmt.Sprintf("agent_egress[%d]", i), Problem: fmt.Sprintf("%s is not allowed in the agent phase by the server policy (egress.allow_agent)", h)}
		}
		e.AgentEgress = append(e.AgentEgress, h)
		e.Sources["agent_egress"] = rs.ruleSource + " + " + rs.fileSource("agent_egress")
	}
	return nil
}

// limits merges numeric limits: task, then file, then rule defaults, each
// lowered to the rule's cap.
func (rs *resolver) limits(t task.Task) {
	e, f, r := rs.e, rs.file, rs.rule
	fs := rs.fileSource("limits")
	num := func(name string, task, file, def, capv float64) float64 {
		v, src := def, rs.ruleSource
		switch {
		case task > 0:
			v, src = task, "task"
		case file > 0:
			v, src = file, fs
		}
		if capv > 0 && v > capv {
			e.Notes = append(e.Notes, fmt.Sprintf("%s %g lowered to the server's maximum %g", name, v, capv))
			v, src = capv, "capped by policy"
		}
		e.Sources[name] = src
		return v
	}
	turns := num("limits.max_turns", float64(t.Limits.MaxTurns), float64(f.Limits.MaxTurns), float64(r.Limits.MaxTurns), float64(r.MaxLimits.MaxTurns))
	if t.Limits.MaxTurns == -1 {
		turns, e.Sources["limits.max_turns"] = -1, "task"
	}
	e.Limits = task.Limits{
		MaxTurns:   int(turns),
		MaxCostUSD: num("limits.max_cost_usd", t.Limits.MaxCostUSD, f.Limits.MaxCostUSD, r.Limits.MaxCostUSD, r.MaxLimits.MaxCostUSD),
		MaxTokens:  int64(num("limits.max_tokens", float64(t.Limits.MaxTokens), float64(f.Limits.MaxTokens), float64(r.Limits.MaxTokens), float64(r.MaxLimits.MaxTokens))),
		Timeout:    task.Duration(rs.duration("limits.timeout", time.Duration(t.Limits.Timeout), f.Limits.Timeout, "limits", r.Limits.Timeout, r.MaxLimits.Timeout)),
	}
	e.Sandbox = task.SandboxOptions{
		Network:  "none",
		MemoryMB: int64(num("sandbox.memory_mb", float64(t.Sandbox.MemoryMB), float64(f.Limits.MemoryMB), float64(r.Limits.MemoryMB), float64(r.MaxLimits.MemoryMB))),
		CPUs:     num("sandbox.cpus", t.Sandbox.CPUs, f.Limits.CPUs, r.Limits.CPUs, r.MaxLimits.CPUs),
		Pids:     int64(num("sandbox.pids", float64(t.Sandbox.Pids), float64(f.Limits.Pids), float64(r.Limits.Pids), float64(r.MaxLimits.Pids))),
		DiskMB:   int64(num("sandbox.disk_mb", float64(t.Sandbox.DiskMB), float64(f.Limits.DiskMB), float64(r.Limits.DiskMB), float64(r.MaxLimits.DiskMB))),
	}
	e.Sources["sandbox.network"] = "built-in"
	if t.Sandbox.Network == "bridge" && Bool(r.NetworkBridge) {
		e.Sandbox.Network, e.Sources["sandbox.network"] = "bridge", "task"
	}
}

// SecretValues reads the values of the rule's secrets for a repository
// (from the worker's environment or files). A secret that cannot be read
// is an error naming it, never an empty value.
func (p *Policy) SecretValues(repoURL string, getenv func(string) string) (map[string]string, error) {
	r := p.For(repoURL)
	out := make(map[string]string, len(r.Secrets))
	for name, s := range r.Secrets {
		var v string
		if s.Env != "" {
			v = getenv(s.Env)
		} else {
			b, err := os.ReadFile(s.File)
			if err != nil {
				return nil, fmt.Errorf("secret %s: %w", name, err)
			}
			v = strings.TrimRight(string(b), "\r\n")
		}
		if v == "" {
			return nil, fmt.Errorf("secret %s: its source (%s%s) is empty or unset", name, s.Env, s.File)
		}
		out[name] = v
	}
	return out, nil
}
