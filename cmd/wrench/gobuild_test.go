package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGo stands in for the go command in scripts/gobuild.sh: three
// packages to build, and a compile error when FAKE_FAIL is set.
const fakeGo = `#!/usr/bin/env bash
case "$1" in
mod) exit 0 ;;
list) printf 'example.com/a\nexample.com/b\nexample.com/c\n' ;;
build)
  for p in example.com/a example.com/b; do echo "$p" >&2; sleep 0.2; done
  if [ -n "${FAKE_FAIL:-}" ]; then
    echo "# example.com/c" >&2; echo "c/c.go:3:1: syntax error: unexpected }" >&2; exit 1
  fi
  echo example.com/c >&2 ;;
esac
`

func runGobuild(t *testing.T, tty bool, env ...string) (string, int) {
	t.Helper()
	dir := t.TempDir()
	goBin := filepath.Join(dir, "go")
	if err := os.WriteFile(goBin, []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(moduleRoot(t), "scripts", "gobuild.sh")
	var cmd *exec.Cmd
	if tty {
		if _, err := exec.LookPath("script"); err != nil {
			t.Skip("script(1) is not installed: no pseudo-terminal to test with")
		}
		cmd = exec.Command("script", "-qec", script+" bin/wrench ./cmd/wrench", "/dev/null")
	} else {
		cmd = exec.Command(script, "bin/wrench", "./cmd/wrench")
	}
	cmd.Env = append(os.Environ(), append(env, "GO="+goBin, "TERM=xterm")...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// TestGobuildShowsProgress: the build make runs says how far it is — plain
// lines when its output is not a terminal, one line redrawn in place on a
// terminal — passes compiler errors through and exits as go did.
func TestGobuildShowsProgress(t *testing.T) {
	out, code := runGobuild(t, false, "WRENCH_PROGRESS_EVERY=0")
	if code != 0 || strings.Contains(out, "\r") ||
		!strings.Contains(out, "building bin/wrench: 2/3 packages compiled") || !strings.Contains(out, "built bin/wrench in") {
		t.Errorf("plain: exit %d\n%q", code, out)
	}
	out, code = runGobuild(t, false, "WRENCH_PROGRESS_EVERY=0", "FAKE_FAIL=1")
	if code != 1 || !strings.Contains(out, "c/c.go:3:1: syntax error: unexpected }") || !strings.Contains(out, "go build exit 1") {
		t.Errorf("failing build: exit %d\n%q", code, out)
	}
	out, code = runGobuild(t, true)
	if code != 0 || !strings.Contains(out, "\r\x1b[Kbuilding bin/wrench: 3/3 packages compiled") {
		t.Errorf("terminal: exit %d\n%q", code, out)
	}
}
