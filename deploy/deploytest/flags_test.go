package deploytest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
)

// pendingFlags are flags the chart passes that the CLI does not have yet,
// each with what is missing. A flag listed here that the CLI has makes the
// test fail, so the list shrinks as the CLI catches up.
var pendingFlags = map[string]string{}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildOut  []byte
)

// wrenchBinary builds cmd/wrench once per test binary run.
func wrenchBinary(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	buildOnce.Do(func() {
		dir, err := osMkdirTemp()
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "wrench")
		cmd := exec.Command("go", "build", "-o", builtBin, "./cmd/wrench")
		cmd.Dir = root
		cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/wrench: %v\n%s", buildErr, buildOut)
	}
	return builtBin
}

var flagLine = regexp.MustCompile(`^\s+--?([a-z][a-z0-9-]*)`)

// cliFlags returns the flags of `wrench <sub>`, read from its -h output.
func cliFlags(t *testing.T, sub string) map[string]bool {
	t.Helper()
	out, _ := exec.Command(wrenchBinary(t), sub, "-h").CombinedOutput()
	flags := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if m := flagLine.FindStringSubmatch(sc.Text()); m != nil {
			flags[m[1]] = true
		}
	}
	if len(flags) == 0 {
		t.Fatalf("wrench %s -h lists no flags:\n%s", sub, out)
	}
	return flags
}

// TestChartFlagsExistInCLI checks every flag the chart's containers pass
// to `wrench serve` and `wrench worker` against the real binary.
func TestChartFlagsExistInCLI(t *testing.T) {
	c := loadChart(t, chartDir(t))
	known := map[string]map[string]bool{}
	used := map[string]bool{}
	for _, sc := range scenarios {
		for name, pod := range pods(renderScenario(t, c, sc.values)) {
			w := containerByName(pod, "wrench")
			args := list(w, "args")
			sub, _ := args[0].(string)
			if sub != "serve" && sub != "worker" {
				t.Errorf("%s %s: first argument %q is not a subcommand", sc.name, name, sub)
				continue
			}
			if known[sub] == nil {
				known[sub] = cliFlags(t, sub)
			}
			for _, a := range args[1:] {
				s, _ := a.(string)
				if !strings.HasPrefix(s, "--") || !strings.Contains(s, "=") {
					t.Errorf("%s %s: argument %q: want --flag=value", sc.name, name, s)
					continue
				}
				flag := strings.TrimPrefix(s[:strings.Index(s, "=")], "--")
				key := sub + " --" + flag
				used[key] = true
				if known[sub][flag] {
					continue
				}
				if _, ok := pendingFlags[key]; !ok {
					t.Errorf("%s %s: wrench %s has no flag --%s", sc.name, name, sub, flag)
				}
			}
		}
	}
	var pending []string
	for key, why := range pendingFlags {
		sub, flag, _ := strings.Cut(key, " --")
		if known[sub] != nil && known[sub][flag] {
			t.Errorf("wrench %s now has --%s: remove it from pendingFlags (and the notes about it in values.yaml, NOTES.txt and docs/operations.md)", sub, flag)
			continue
		}
		if used[key] {
			pending = append(pending, key+": "+why)
		}
	}
	sort.Strings(pending)
	for _, p := range pending {
		t.Logf("PENDING in the CLI, used by the chart: %s", p)
	}
}

// osMkdirTemp makes a directory for the built binary that outlives the
// test that first asked for it (t.TempDir would be removed with that test).
func osMkdirTemp() (string, error) { return os.MkdirTemp("", "wrench-deploytest-") }
