package policy

import (
	"net"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/repoconfig"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// Options are what the built-in default depends on.
type Options struct {
	// Loopback is true when the server's API listens on loopback only (or
	// there is no API: `wrench run`). Tasks may then name paths on the
	// server's disk and scripted models; beyond loopback they may not.
	Loopback bool
}

// DefaultImage is the sandbox image `wrench image build` produces and tasks
// run on unless something names another.
const DefaultImage = sandbox.DefaultImage

// SetupEgress are the hosts every setup may reach by default: the Go module
// proxy and checksum database (modules and Go toolchains), Debian's
// archive, and the Python, npm, Rust, Ruby and Maven registries.
var SetupEgress = []string{
	"proxy.golang.org", "sum.golang.org",
	"deb.debian.org", "security.debian.org",
	"pypi.org", "files.pythonhosted.org",
	"registry.npmjs.org", "registry.yarnpkg.com",
	"crates.io", "index.crates.io", "static.crates.io",
	"rubygems.org", "index.rubygems.org",
	"repo.maven.apache.org", "repo1.maven.org",
}

// Default is the policy without a file: every repository allowed, the
// built-in limits (task's and sandbox's defaults), the ecosystem registries for setup and nothing for the agent
// phase, setup as root allowed, the default image and environment images
// only, and paths on the server's disk and scripted models only when the
// API is loopback-only.
func Default(opts Options) *Policy {
	return &Policy{Defaults: Rule{
		Allow: ptr(true),
		Limits: Limits{
			MaxTurns:     task.DefaultMaxTurns,
			Timeout:      Duration(task.DefaultTimeout),
			MemoryMB:     sandbox.DefaultMemoryBytes >> 20,
			CPUs:         float64(sandbox.DefaultNanoCPUs) / 1e9,
			Pids:         sandbox.DefaultPids,
			DiskMB:       sandbox.DefaultDiskBytes >> 20,
			SetupTimeout: Duration(task.DefaultSetupTimeout),
			TestTimeout:  Duration(task.DefaultTestTimeout),
		},
		MaxLimits: Limits{
			MaxTurns:     task.MaxTurnsHardCap,
			MaxCostUSD:   50,
			MaxTokens:    50_000_000,
			Timeout:      Duration(task.MaxTimeout),
			MemoryMB:     16384,
			CPUs:         8,
			Pids:         8192,
			DiskMB:       65536,
			SetupTimeout: Duration(2 * time.Hour),
			TestTimeout:  Duration(2 * time.Hour),
		},
		Egress: Egress{
			Setup:      append([]string(nil), SetupEgress...),
			Agent:      []string{},
			Allow:      []string{"*"},
			AllowAgent: []string{},
		},
		Models:            []string{"*"},
		ScriptedModels:    ptr(opts.Loopback),
		LocalPaths:        ptr(opts.Loopback),
		NetworkBridge:     ptr(false),
		SetupRoot:         ptr(true),
		Images:            []string{"wrench-sandbox:*", "wrench-env:*"},
		Resume:            ptr(true),
		DraftWithoutTests: ptr(true),
	}}
}

// checkHost checks an egress host pattern.
func checkHost(h string) error { return repoconfig.CheckHostPattern(h) }

// MatchHost reports whether host (with or without ":port") matches one of
// patterns: an exact host ("pypi.org" matches any port, "pypi.org:443"
// only that port), "*.domain" (any subdomain, not the domain itself), or
// "*" (every host). Matching ignores case and a trailing dot.
func MatchHost(patterns []string, hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, p := range patterns {
		if p == "*" {
			return true
		}
		ph, pp := strings.ToLower(p), ""
		if i := strings.LastIndex(ph, ":"); i > 0 {
			ph, pp = ph[:i], ph[i+1:]
		}
		if pp != "" && pp != port {
			continue
		}
		if rest, ok := strings.CutPrefix(ph, "*."); ok {
			if strings.HasSuffix(host, "."+rest) {
				return true
			}
			continue
		}
		if host == ph {
			return true
		}
	}
	return false
}
