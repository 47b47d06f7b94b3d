package importrules

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/wrenchworks/wrench"

// infrastructure are the module paths the pure packages must not reach,
// directly or not.
var infrastructure = []string{
	"github.com/docker/",
	"github.com/moby/",
	"github.com/nats-io/",
	"github.com/openai/openai-go",
	"github.com/go-git/",
	"github.com/prometheus/",
	"go.opentelemetry.io/",
}

// dockerSDK are the module paths of the Docker engine's Go SDK.
var dockerSDK = []string{"github.com/docker/", "github.com/moby/"}

// dockerAllowed may import the Docker SDK: the backend and its test kit.
func dockerAllowed(pkg string) bool {
	return pkg == module+"/sandbox/docker" || strings.HasPrefix(pkg, module+"/sandbox/docker/")
}

// goList runs `go list` with args and returns its output lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

func hasPrefix(path string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(path, p) })
}

// stdlibOnly are the leaf packages that import only the standard library:
// the sandbox vocabulary, the diff, and the logger binding the dispatcher
// and the worker log a task's lines through (so that they say its trace
// without importing OpenTelemetry).
var stdlibOnly = map[string]bool{module + "/sandbox": true, module + "/diff": true, module + "/internal/logctx": true}

// TestPurePackagesImportNoInfrastructure: task, agent (with its edit
// formats and in-memory fake), the sandbox vocabulary, the diff, the
// reaper (which gets the engine and the workspaces through interfaces of
// its own) and the task loggers' binding reach none of the infrastructure
// modules, and the leaf packages only the standard library.
func TestPurePackagesImportNoInfrastructure(t *testing.T) {
	for _, pattern := range []string{module + "/task/...", module + "/agent/...", module + "/sandbox", module + "/diff", module + "/sandbox/reaper", module + "/internal/logctx"} {
		for _, pkg := range goList(t, pattern) {
			for _, line := range goList(t, "-deps", "-f", "{{.ImportPath}} {{.Standard}}", pkg) {
				dep, std, _ := strings.Cut(line, " ")
				if hasPrefix(dep, infrastructure) {
					t.Errorf("%s imports %s (infrastructure)", pkg, dep)
				}
				if stdlibOnly[pkg] && std != "true" && dep != pkg {
					t.Errorf("package %s is a leaf of the standard library, but imports %s", pkg, dep)
				}
			}
		}
	}
}

// TestDockerSDKStaysInTheBackend: only sandbox/docker (and its test kit)
// imports the Docker SDK; the rest of Wrench reaches the engine through
// docker.Engine and docker.Provider.
func TestDockerSDKStaysInTheBackend(t *testing.T) {
	users := map[string]bool{}
	for _, line := range goList(t, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...") {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			if hasPrefix(imp, dockerSDK) {
				users[fields[0]] = true
			}
		}
	}
	if !users[module+"/sandbox/docker"] {
		t.Errorf("sandbox/docker does not import the Docker SDK: is the listing wrong?")
	}
	for pkg := range users {
		if !dockerAllowed(pkg) {
			t.Errorf("%s imports the Docker SDK: only sandbox/docker may (go through docker.Engine or docker.Provider instead)", pkg)
		}
	}
}
