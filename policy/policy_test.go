package policy

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/repoconfig"
	"github.com/wrenchworks/wrench/task"
)

func loadExample(t *testing.T) *Policy {
	t.Helper()
	p, err := Load("../examples/policy.yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExamplePolicy(t *testing.T) {
	p := loadExample(t)
	r := p.For("https://github.com/acme/payments-api.git")
	if r.Test != "make test" || r.MaxLimits.MaxCostUSD != 25 || r.MaxLimits.MaxTurns != 200 {
		t.Errorf("payments rule not laid over defaults: %+v", r)
	}
	if _, ok := r.Secrets["NPM_TOKEN"]; !ok {
		t.Error("payments rule lost its secret")
	}
	if r := p.For("https://github.com/acme/web"); r.Test != "" || !Bool(r.Allow) {
		t.Errorf("acme rule: %+v", r)
	}
	var denied *ErrDenied
	err := p.Admit(task.Task{Repo: task.Repo{URL: "https://github.com/evil/x"}, Instruction: "x"})
	if !errors.As(err, &denied) || !strings.Contains(denied.Error(), "only acme repositories") {
		t.Fatalf("want ErrDenied with the reason, got %v", err)
	}
	if !strings.Contains(denied.HowToAllow(), "examples/policy.yaml") {
		t.Errorf("HowToAllow does not name the file: %s", denied.HowToAllow())
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]string{
		"unknown field":          "defaults:\n  alow: true\n",
		"bad duration":           "defaults:\n  limits: {timeout: soon}\n",
		"rule without match":     "repositories:\n  - allow: true\n",
		"bad host":               "defaults:\n  egress: {setup: [\"http://x/\"]}\n",
		"secret two sources":     "defaults:\n  secrets: {A: {env: X, file: /y}}\n",
		"match in defaults":      "defaults:\n  match: x\n",
		"negative budget":        "defaults:\n  budget: {daily_usd: -1}\n",
		"negative tenant budget": "tenants:\n  - {name: a, budget: {daily_usd: -2}}\n",
	}
	for name, y := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(y), Options{})
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("want *Error, got %v", err)
			}
			if strings.Contains(err.Error(), "policy.") {
				t.Errorf("message leaks Go type names: %v", err)
			}
		})
	}
}

func TestEmptyFileIsDefault(t *testing.T) {
	p, err := Parse(nil, Options{Loopback: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Defaults, Default(Options{Loopback: true}).Defaults) {
		t.Errorf("empty policy differs from the default")
	}
}

func TestMatchURL(t *testing.T) {
	cases := []struct {
		pattern, url string
		want         bool
	}{
		{"https://github.com/acme/*", "https://github.com/acme/web", true},
		{"https://github.com/acme/*", "https://github.com/acme/web.git", true},
		{"https://github.com/acme/*", "https://github.com/acmex/web", false},
		{"https://github.com/acme/web", "https://github.com/acme/web.git/", true},
		{"https://github.com/acme/web", "https://GitHub.com/Acme/Web", true},
		{"*", "/src/repo", true},
		{"https://*/acme/*", "https://gitlab.com/acme/x", true},
		{"https://*/acme/*", "https://gitlab.com/other/x", false},
		{"*.example.com/*", "https://git.example.com/x", true},
	}
	for _, c := range cases {
		if got := MatchURL(c.pattern, c.url); got != c.want {
			t.Errorf("MatchURL(%q, %q) = %v", c.pattern, c.url, got)
		}
	}
}

func TestMatchHost(t *testing.T) {
	cases := []struct {
		patterns []string
		host     string
		want     bool
	}{
		{[]string{"pypi.org"}, "pypi.org:443", true},
		{[]string{"pypi.org"}, "PyPI.org.", true},
		{[]string{"pypi.org"}, "evilpypi.org:443", false},
		{[]string{"pypi.org:443"}, "pypi.org:80", false},
		{[]string{"*.pythonhosted.org"}, "files.pythonhosted.org:443", true},
		{[]string{"*.pythonhosted.org"}, "pythonhosted.org:443", false},
		{[]string{"*.pythonhosted.org"}, "pythonhosted.org.evil.com:443", false},
		{[]string{"*"}, "anything:1", true},
		{nil, "pypi.org:443", false},
	}
	for _, c := range cases {
		if got := MatchHost(c.patterns, c.host); got != c.want {
			t.Errorf("MatchHost(%v, %q) = %v", c.patterns, c.host, got)
		}
	}
}

func TestAdmit(t *testing.T) {
	remote := Default(Options{Loopback: false})
	local := Default(Options{Loopback: true})
	base := func() task.Task {
		return task.Task{Repo: task.Repo{URL: "https://example.com/r.git"}, Instruction: "fix"}
	}
	cases := []struct {
		name   string
		p      *Policy
		mutate func(*task.Task)
		fields []string
	}{
		{"plain", remote, func(*task.Task) {}, nil},
		{"local path remote", remote, func(t *task.Task) { t.Repo.URL = "/etc" }, []string{"repo.url"}},
		{"file url remote", remote, func(t *task.Task) { t.Repo.URL = "file:///srv/x" }, []string{"repo.url"}},
		{"local path loopback", local, func(t *task.Task) { t.Repo.URL = "/src/x" }, nil},
		{"scripted remote", remote, func(t *task.Task) { t.Model = "scripted:/etc/shadow" }, []string{"model"}},
		{"scripted loopback", local, func(t *task.Task) { t.Model = "scripted:/tmp/x.yaml" }, nil},
		{"bridge", local, func(t *task.Task) { t.Sandbox.Network = "bridge" }, []string{"sandbox.network"}},
		{"huge pids and memory", local, func(t *task.Task) { t.Sandbox.Pids = 4_000_000; t.Sandbox.MemoryMB = 1_000_000 }, []string{"sandbox.memory_mb", "sandbox.pids"}},
		{"foreign image", local, func(t *task.Task) { t.Image = "alpine:latest" }, []string{"image"}},
		{"env image", local, func(t *task.Task) { t.Image = "wrench-env:abc" }, nil},
		{"long timeout", local, func(t *task.Task) { t.Limits.Timeout = task.Duration(48 * time.Hour) }, []string{"limits.timeout"}},
		{"narrower is fine", local, func(t *task.Task) { t.Sandbox.MemoryMB = 512; t.Limits.MaxTurns = 5 }, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk := base()
			c.mutate(&tk)
			err := c.p.Admit(tk)
			var got []string
			var ve *task.ValidationError
			if errors.As(err, &ve) {
				for _, f := range ve.Fields {
					got = append(got, f.Field)
				}
			} else if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if !reflect.DeepEqual(got, c.fields) {
				t.Errorf("fields %v, want %v (%v)", got, c.fields, err)
			}
		})
	}
}

func TestResolvePrecedence(t *testing.T) {
	p, err := Parse([]byte(`
defaults:
  test: make check
  max_limits: {max_turns: 40, memory_mb: 4096, setup_timeout: 20m}
  egress: {allow: ["*.corp.example"]}
repositories:
  - match: "https://git.corp.example/*"
    limits: {max_turns: 20}
`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	file, err := repoconfig.Parse([]byte("test: go test ./...\nsetup_timeout: 1h\nlimits:\n  max_turns: 100\n  memory_mb: 3000\negress: [mirror.corp.example]\n"))
	if err != nil {
		t.Fatal(err)
	}
	tk := task.Task{Repo: task.Repo{URL: "https://git.corp.example/app"}, Instruction: "x", Sandbox: task.SandboxOptions{MemoryMB: 1024}}
	e, err := p.Resolve(tk, file)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		field, source string
		ok            bool
	}{
		{"test", ".wrench.yaml:1", e.Test == "go test ./..."},
		{"setup_timeout", "capped by policy", e.SetupTimeout == 20*time.Minute},
		{"limits.max_turns", "capped by policy", e.Limits.MaxTurns == 40},
		{"sandbox.memory_mb", "task", e.Sandbox.MemoryMB == 1024},
		{"sandbox.pids", "policy rule https://git.corp.example/*", e.Sandbox.Pids == 512},
		{"image", "built-in", e.Image == DefaultImage},
	}
	for _, c := range checks {
		if !c.ok || e.Sources[c.field] != c.source {
			t.Errorf("%s: ok=%v source %q, want %q (%+v)", c.field, c.ok, e.Sources[c.field], c.source, e)
		}
	}
	if !MatchHost(e.SetupEgress, "mirror.corp.example:443") || !MatchHost(e.SetupEgress, "proxy.golang.org:443") {
		t.Errorf("setup egress %v", e.SetupEgress)
	}
	if len(e.AgentEgress) != 0 {
		t.Errorf("agent egress %v, want none", e.AgentEgress)
	}
	if len(e.Notes) != 2 {
		t.Errorf("notes %v, want the two lowered values", e.Notes)
	}
	// Without a file, the policy's test command applies.
	e, err = p.Resolve(task.Task{Repo: task.Repo{URL: "https://other/x"}, Instruction: "x"}, nil)
	if err != nil || e.Test != "make check" || e.Sources["test"] != "policy defaults" {
		t.Errorf("no file: %+v, %v", e, err)
	}
}

func TestResolveRefusals(t *testing.T) {
	strict, err := Parse([]byte("defaults:\n  setup_root: false\n  egress: {allow: []}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ yaml, field string }{
		{"egress: [evil.example]\n", "egress[0]"},
		{"agent_egress: [pypi.org]\n", "agent_egress[0]"},
		{"setup_user: root\n", "setup_user"},
		{"image:\n  packages: [libpq-dev]\n", "image.packages"},
		{"image: alpine:3\n", "image"},
	}
	for _, c := range cases {
		f, err := repoconfig.Parse([]byte(c.yaml))
		if err != nil {
			t.Fatal(err)
		}
		_, err = strict.Resolve(task.Task{Repo: task.Repo{URL: "https://x/y"}}, f)
		var e *repoconfig.Error
		if !errors.As(err, &e) || e.Field != c.field || e.Line != 1 {
			t.Errorf("%q: want a repoconfig error on %s line 1, got %v", c.yaml, c.field, err)
		}
	}
	// A host the setup defaults list is fine even with an empty allow list.
	f, _ := repoconfig.Parse([]byte("egress: [pypi.org]\n"))
	if _, err := strict.Resolve(task.Task{Repo: task.Repo{URL: "https://x/y"}}, f); err != nil {
		t.Errorf("default host refused: %v", err)
	}
}

func TestSecretValues(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/tok", []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := Parse([]byte("defaults:\n  secrets:\n    A: {env: MY_A}\n    B: {file: "+dir+"/tok}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.SecretValues("https://x/y", func(k string) string { return map[string]string{"MY_A": "aaa"}[k] })
	if err != nil || got["A"] != "aaa" || got["B"] != "s3cret" {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := p.SecretValues("https://x/y", func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "secret A") {
		t.Errorf("an unset secret must be an error naming it, got %v", err)
	}
}
