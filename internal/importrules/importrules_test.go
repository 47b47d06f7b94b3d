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

// dockerDebt are the packages that import the Docker SDK today though they
// should not, each with what would remove it. The test fails when one of
// them no longer does (delete it here), and for any package not listed.
var dockerDebt = map[string]string{
	module + "/cmd/wrench":     "builds the engine client and hands it to the packages below; sandbox/docker should own the client",
	module + "/sandbox/doctor": "inspects the engine (version, storage driver, runtimes); should ask sandbox/docker",
	module + "/sandbox/image":  "builds and inspects images; an image builder in sandbox/docker would hold the calls",
	module + "/sandbox/reaper": "lists and removes labelled containers; should use a sandbox/docker listing",
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
// the sandbox vocabulary and the diff.
var stdlibOnly = map[string]bool{module + "/sandbox": true, module + "/diff": true}

// TestPurePackagesImportNoInfrastructure: task, agent (with its edit
// formats and in-memory fake), the sandbox vocabulary and the diff reach
// none of the infrastructure modules, and the leaf packages only the
// standard library.
func TestPurePackagesImportNoInfrastructure(t *testing.T) {
	for _, pattern := range []string{module + "/task/...", module + "/agent/...", module + "/sandbox", module + "/diff"} {
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
// imports the Docker SDK, apart from the packages in dockerDebt.
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
	for pkg := range users {
		if !dockerAllowed(pkg) && dockerDebt[pkg] == "" {
			t.Errorf("%s imports the Docker SDK: only sandbox/docker may (go through a sandbox/docker API instead)", pkg)
		}
	}
	for pkg := range dockerDebt {
		if !users[pkg] {
			t.Errorf("%s no longer imports the Docker SDK: remove it from dockerDebt", pkg)
		}
	}
}
