package environment

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/wrenchworks/wrench/policy"
)

// Manifests are the file names (matched at any depth, as path.Match
// patterns on the base name) whose contents key an environment: what
// package managers and toolchains read to decide what to install.
var Manifests = []string{
	// Go
	"go.mod", "go.sum", "go.work", "go.work.sum",
	// Python
	"requirements*.txt", "constraints*.txt", "pyproject.toml", "setup.py", "setup.cfg",
	"poetry.lock", "uv.lock", "Pipfile", "Pipfile.lock", ".python-version",
	// JavaScript
	"package.json", "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml",
	"bun.lockb", ".nvmrc", ".node-version",
	// Rust, Ruby, JVM, PHP, Elixir
	"Cargo.toml", "Cargo.lock", "rust-toolchain", "rust-toolchain.toml",
	"Gemfile", "Gemfile.lock", "*.gemspec", ".ruby-version",
	"pom.xml", "build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts", "gradle.lockfile",
	"composer.json", "composer.lock", "mix.exs", "mix.lock",
	// Toolchain pins of several ecosystems
	".tool-versions",
}

// skipDirs are directories whose manifests are not the repository's own:
// vendored and installed dependencies and test fixtures.
var skipDirs = map[string]bool{"vendor": true, "node_modules": true, "testdata": true, ".git": true, "third_party": true}

// keyVersion changes whenever what a snapshot holds changes in a way the
// other inputs would not show.
const keyVersion = "wrench-env/2"

// KeyInput is everything an environment's key hashes.
type KeyInput struct {
	// BaseImageID is the content id of the base image (not its name).
	BaseImageID string
	Config      *policy.Effective
	// Files are the commit's files and their blob ids (workspace.Commit.Files).
	Files map[string]string
}

// Key returns the environment key (hex) and the manifests it covered.
func Key(in KeyInput) (string, []string) {
	h := sha256.New()
	line := func(parts ...string) {
		for _, p := range parts {
			fmt.Fprintf(h, "%d:%s ", len(p), p)
		}
		io.WriteString(h, "\n")
	}
	c := in.Config
	line(keyVersion)
	line("base", in.BaseImageID)
	line(append([]string{"packages"}, sorted(c.Packages)...)...)
	line("user", c.SetupUser)
	line(append([]string{"setup"}, c.Setup...)...)
	for _, k := range sortedKeys(c.Env) {
		line("env", k, c.Env[k])
	}
	line(append([]string{"egress"}, sorted(c.SetupEgress)...)...)
	line(append([]string{"secrets"}, c.SecretNames...)...)
	manifests := MatchManifests(in.Files, c.Manifests)
	for _, p := range manifests {
		line("file", p, in.Files[p])
	}
	return hex.EncodeToString(h.Sum(nil)), manifests
}

// MatchManifests returns the paths of files that are manifests: a base
// name in Manifests (outside skipDirs), or a path matching one of extra
// (patterns relative to the repository root), sorted.
func MatchManifests(files map[string]string, extra []string) []string {
	var out []string
	for p := range files {
		if isManifest(p, extra) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func isManifest(p string, extra []string) bool {
	for _, pat := range extra {
		if ok, _ := path.Match(pat, p); ok {
			return true
		}
	}
	if p == ".wrench.yaml" {
		return true
	}
	dir, base := path.Split(p)
	for _, part := range strings.Split(strings.TrimSuffix(dir, "/"), "/") {
		if skipDirs[part] {
			return false
		}
	}
	for _, pat := range Manifests {
		if ok, _ := path.Match(pat, base); ok {
			return true
		}
	}
	return false
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
