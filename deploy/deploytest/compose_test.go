package deploytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/sandbox"
	"gopkg.in/yaml.v3"
)

func deployDir(t *testing.T) string { return filepath.Join(repoRoot(t), "deploy") }

func loadCompose(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir(t), "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return c
}

// composeTool returns the Compose command (docker-compose, or the docker
// compose plugin), or nil when neither is installed.
func composeTool() []string {
	if err := exec.Command("docker-compose", "version").Run(); err == nil {
		return []string{"docker-compose"}
	}
	if err := exec.Command("docker", "compose", "version").Run(); err == nil {
		return []string{"docker", "compose"}
	}
	return nil
}

var interpolation = regexp.MustCompile(`^\$\{[A-Z_]+(:?[-?][^}]*)?\}$`)

// TestComposeFile checks compose.yaml's wrench service for what running
// sandboxes from a container needs, and its hardening.
func TestComposeFile(t *testing.T) {
	c := loadCompose(t)
	w, _ := get(c, "services", "wrench").(map[string]any)
	if w == nil {
		t.Fatal("compose.yaml has no wrench service")
	}
	if str(w, "build", "dockerfile") != "Dockerfile" || str(w, "build", "context") != ".." {
		t.Errorf("wrench is not built from the repository's Dockerfile: %v", w["build"])
	}
	// The data directory at the same path on both sides (wrench copies its
	// binary there at start, for the sandboxes).
	var dataExpr string
	var socket bool
	for _, v := range list(w, "volumes") {
		s, _ := v.(string)
		parts := splitVolume(s)
		src, dst := parts[0], parts[len(parts)-1]
		if len(parts) == 3 {
			dst = parts[1]
		}
		if src == "/var/run/docker.sock" && dst == "/var/run/docker.sock" {
			socket = true
		}
		if strings.Contains(src, "WRENCH_DATA") {
			if src != dst {
				t.Errorf("data volume %q: host and container paths differ; the engine would not find workspaces", s)
			}
			dataExpr = src
		}
	}
	if !socket || dataExpr == "" {
		t.Fatalf("volumes %v: want the Docker socket and the data directory", w["volumes"])
	}
	if w["entrypoint"] != nil {
		t.Errorf("entrypoint %v: want the image's (wrench copies itself into the data directory)", w["entrypoint"])
	}
	cmd := list(w, "command")
	if str(cmd, 0) != "serve" || !slices.Contains(cmd, any("--data-dir="+dataExpr)) || !slices.Contains(cmd, any("--http=0.0.0.0:7070")) {
		t.Errorf("command %v: want serve --http=0.0.0.0:7070 --data-dir=%s", cmd, dataExpr)
	}
	// Hardening of the wrench container (the image runs as uid 1000; an
	// override to anything else, root above all, is a mistake).
	if (w["user"] != nil && str(w, "user") != sandbox.User()) || get(w, "read_only") != true ||
		!slices.Equal(list(w, "cap_drop"), []any{"ALL"}) || !slices.Contains(list(w, "security_opt"), any("no-new-privileges:true")) {
		t.Errorf("wrench service is not hardened: user %v read_only %v cap_drop %v security_opt %v",
			w["user"], w["read_only"], w["cap_drop"], w["security_opt"])
	}
	if len(list(w, "group_add")) != 1 {
		t.Error("wrench does not join the socket's group")
	}
	// Secrets only by interpolation from .env or the shell.
	env, _ := w["environment"].(map[string]any)
	for k, v := range env {
		s, _ := v.(string)
		if (strings.Contains(k, "TOKEN") || strings.Contains(k, "KEY")) && !interpolation.MatchString(s) {
			t.Errorf("environment %s = %q: secrets must come from ${...}, never inline", k, s)
		}
	}
	if !strings.Contains(str(env, "WRENCH_API_TOKEN"), ":?") {
		t.Error("WRENCH_API_TOKEN is not required (${WRENCH_API_TOKEN:?...}): serve refuses to listen off loopback without it")
	}
	for name, svc := range get(c, "services").(map[string]any) {
		for _, p := range list(svc, "ports") {
			if s, _ := p.(string); !strings.HasPrefix(s, "127.0.0.1:") {
				t.Errorf("service %s publishes %q beyond loopback", name, s)
			}
		}
		if name != "wrench" && !slices.Equal(list(svc, "profiles"), []any{"monitoring"}) {
			t.Errorf("service %s is not in the monitoring profile: it pulls an image, which needs a registry", name)
		}
		for _, v := range list(svc, "volumes") {
			s, _ := v.(string)
			if src := splitVolume(s)[0]; strings.HasPrefix(src, "./") {
				if _, err := os.Stat(filepath.Join(deployDir(t), src)); err != nil {
					t.Errorf("service %s mounts %s: %v", name, src, err)
				}
			}
		}
	}
	// The flags exist.
	flags := cliFlags(t, "serve")
	for _, a := range cmd[1:] {
		s, _ := a.(string)
		name, _, _ := strings.Cut(strings.TrimPrefix(s, "--"), "=")
		if !flags[name] {
			t.Errorf("compose.yaml passes %q, but wrench serve has no --%s", s, name)
		}
	}
}

// TestComposeConfig runs the Compose tool's own validation and checks that
// a missing API token stops it.
func TestComposeConfig(t *testing.T) {
	tool := composeTool()
	if tool == nil {
		t.Skip("neither docker-compose nor the docker compose plugin is installed; TestComposeFile checks the file's structure")
	}
	run := func(env ...string) (string, error) {
		args := append(slices.Clone(tool[1:]), "-f", filepath.Join(deployDir(t), "compose.yaml"), "--profile", "monitoring", "config")
		cmd := exec.Command(tool[0], args...)
		cmd.Env = append(filteredEnv("WRENCH_", "DOCKER_GID"), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("WRENCH_API_TOKEN=t0ken-for-the-test", "DOCKER_GID=999")
	if err != nil {
		t.Fatalf("compose config: %v\n%s", err, out)
	}
	for _, want := range []string{"/var/lib/wrench:/var/lib/wrench", "prom/prometheus", "grafana/grafana"} {
		if !strings.Contains(out, want) {
			t.Errorf("compose config output lacks %q:\n%s", want, out)
		}
	}
	if out, err := run("DOCKER_GID=999"); err == nil || !strings.Contains(out, "WRENCH_API_TOKEN") {
		t.Errorf("compose config without WRENCH_API_TOKEN: err %v, output %q; want a refusal naming it", err, out)
	}
}

// filteredEnv is the environment without variables starting with any of
// prefixes.
func filteredEnv(prefixes ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		keep := true
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// splitVolume splits a Compose short volume syntax "src:dst[:mode]" on the
// colons outside ${...} interpolations.
func splitVolume(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '{' && i > 0 && s[i-1] == '$':
			depth++
		case s[i] == '}' && depth > 0:
			depth--
		case s[i] == ':' && depth == 0:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}
