package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os/exec"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"testing"
)

// groups are the commands made of subcommands.
var groups = subcommands()

// helpArgs are the argument lists that ask each visible command for help.
func helpArgs(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	for name, c := range commands() {
		if c.hidden {
			continue
		}
		for _, sub := range groups[name] {
			out = append(out, []string{name, sub, "-h"})
		}
		out = append(out, []string{name, "-h"})
	}
	sort.Slice(out, func(i, j int) bool { return strings.Join(out[i], " ") < strings.Join(out[j], " ") })
	return out
}

func runDispatch(getenv func(string) string, args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	env := &cliEnv{stdin: strings.NewReader(""), stdout: &o, stderr: &e, getenv: getenv}
	code = dispatch(context.Background(), env, args)
	return o.String(), e.String(), code
}

func noEnv(string) string { return "" }

// flagLine is how every flag starts in help: "  --name" and at most one
// value placeholder, never usage words ("-server wrench serve").
var flagLine = regexp.MustCompile(`^  --[a-z0-9][a-z0-9-]*( [A-Za-z0-9_:|.@-]+)?$`)

func TestHelpExitsZeroWithSynopsisAndFlags(t *testing.T) {
	for _, args := range helpArgs(t) {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			stdout, stderr, code := runDispatch(noEnv, args...)
			if code != exitOK {
				t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr)
			}
			name := "wrench " + strings.Join(args[:len(args)-1], " ")
			if !strings.HasPrefix(stdout, "usage: "+name) {
				t.Fatalf("help does not start with the synopsis of %s:\n%s", name, stdout)
			}
			for _, line := range strings.Split(stdout, "\n") {
				if strings.HasPrefix(line, "  -") && !flagLine.MatchString(line) {
					t.Errorf("garbled flag line %q", line)
				}
			}
		})
	}
}

// TestHelpShowsArguments: commands that take arguments name them.
func TestHelpShowsArguments(t *testing.T) {
	for args, want := range map[string]string{
		"status":         "usage: wrench status [flags] ID",
		"watch":          "usage: wrench watch [flags] ID",
		"result":         "usage: wrench result [flags] ID",
		"cancel":         "usage: wrench cancel [flags] ID",
		"replay":         "usage: wrench replay TRAJECTORY.jsonl --repo",
		"run":            "usage: wrench run --repo PATH|URL --task",
		"model scripted": "usage: wrench model scripted --script FILE",
		"model":          "docs/scripted-model.md",
	} {
		stdout, _, code := runDispatch(noEnv, append(strings.Fields(args), "-h")...)
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("wrench %s -h: exit %d, want %q in:\n%s", args, code, want, stdout)
		}
	}
	// `wrench help run` is `wrench run -h`.
	a, _, _ := runDispatch(noEnv, "help", "run")
	b, _, _ := runDispatch(noEnv, "run", "-h")
	if a != b || a == "" {
		t.Errorf("wrench help run differs from wrench run -h")
	}
}

// TestEveryCommandHasHelp keeps commandHelps in step with commands.
func TestEveryCommandHasHelp(t *testing.T) {
	helps := commandHelps()
	for name, c := range commands() {
		if c.hidden {
			continue
		}
		keys := []string{"wrench " + name}
		if subs := groups[name]; subs != nil {
			keys = nil
			for _, sub := range subs {
				keys = append(keys, "wrench "+name+" "+sub)
			}
		}
		for _, key := range keys {
			if helps[key].about == "" {
				t.Errorf("no help for %q", key)
			}
		}
	}
}

// TestHelpNeverShowsEnvironmentValues: defaults taken from the environment
// (tokens, secrets) are not printed.
func TestHelpNeverShowsEnvironmentValues(t *testing.T) {
	getenv := func(k string) string { return "SENTINEL-" + k }
	for _, args := range helpArgs(t) {
		stdout, stderr, _ := runDispatch(getenv, args...)
		if i := strings.Index(stdout+stderr, "SENTINEL-"); i >= 0 {
			out := stdout + stderr
			t.Errorf("wrench %s shows an environment value: %q", strings.Join(args, " "), out[max(0, i-80):min(len(out), i+40)])
		}
	}
}

func TestBadFlagExitsTwoWithSynopsis(t *testing.T) {
	_, stderr, code := runDispatch(noEnv, "status", "--nope", "t-1")
	if code != exitBadInput || !strings.Contains(stderr, "flag provided but not defined: -nope") ||
		!strings.Contains(stderr, "usage: wrench status [flags] ID") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	_, stderr, code = runDispatch(noEnv, "status")
	if code != exitBadInput || !strings.Contains(stderr, "usage: wrench status [flags] ID") {
		t.Errorf("no id: exit %d, stderr:\n%s", code, stderr)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		stdout, _, code := runDispatch(noEnv, args...)
		if code != 0 || stdout != "wrench "+buildVersion()+"\n" {
			t.Errorf("%v: exit %d, %q", args, code, stdout)
		}
	}
	old := version
	version = "v1.2.3"
	defer func() { version = old }()
	if stdout, _, _ := runDispatch(noEnv, "--version"); stdout != "wrench v1.2.3\n" {
		t.Errorf("the -ldflags version is not reported: %q", stdout)
	}
}

func TestVersionFromBuildInfo(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}}, "v0.3.0"},
		{debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260101000000-0123456789ab+dirty"}}, "v0.0.0-20260101000000-0123456789ab+dirty"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("0123456789abcdef0123", "false")}, "devel-0123456789ab"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("0123456789abcdef0123", "true")}, "devel-0123456789ab-dirty"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
	} {
		if got := versionFrom(&tc.bi); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.bi.Main, got, tc.want)
		}
	}
}

// TestMakefileStampsTheVersion: `make build` passes the git version to
// -X main.version, so a built binary never reports "dev".
func TestMakefileStampsTheVersion(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	cmd := exec.Command("make", "-n", "build")
	cmd.Dir = moduleRoot(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`-X main\.version=(\S*)"`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("make build does not set main.version:\n%s", out)
	}
	if _, err := exec.LookPath("git"); err == nil && len(m[1]) == 0 {
		t.Errorf("make build stamps an empty version:\n%s", out)
	}
}

// TestBuildInfoMetricReportsTheVersion: wrench_build_info carries the
// same version as `wrench version`, never a placeholder.
func TestBuildInfoMetricReportsTheVersion(t *testing.T) {
	old := version
	version = "v9.8.7"
	defer func() { version = old }()
	env := &cliEnv{stdout: io.Discard, stderr: io.Discard, getenv: noEnv}
	tel, err := newServiceTelemetry(context.Background(), env, serviceFlags{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.shutdown()
	mfs, err := tel.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "wrench_build_info" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "version" && l.GetValue() == "v9.8.7" {
					return
				}
			}
		}
		t.Fatalf("wrench_build_info: %v", mf)
	}
	t.Fatal("no wrench_build_info metric")
}
