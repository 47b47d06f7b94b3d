package deploytest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"
)

// The chart is rendered by the real helm binary, built once from the Go
// module proxy by scripts/k8s-tools.sh (`make k8s-tools`) into a cache
// directory. Without it the chart tests skip with a note, except under
// CI=true, where they fail.

// kubeVersion is the Kubernetes version helm renders for; the test
// apiserver (kubeapi_test.go) is built at the same version by
// scripts/k8s-tools.sh.
const kubeVersion = "1.35.4"

// k8sTools are the paths of the tools scripts/k8s-tools.sh built.
type k8sTools struct {
	Helm, APIServer, Kubectl string
}

var (
	toolsOnce sync.Once
	tools     k8sTools
	toolsErr  error
)

// needTools returns the built tools, or skips t (fails it under CI=true)
// naming the make target that builds them.
func needTools(t testing.TB) k8sTools {
	t.Helper()
	toolsOnce.Do(func() {
		root, err := findRepoRoot()
		if err != nil {
			toolsErr = err
			return
		}
		out, err := exec.Command(filepath.Join(root, "scripts", "k8s-tools.sh"), "paths").Output()
		if err != nil {
			toolsErr = fmt.Errorf("helm, kube-apiserver and kubectl are not built (make k8s-tools builds them once, about 6 CPU-minutes per tool on 2 cores): %v", err)
			return
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), "=")
			switch k {
			case "helm":
				tools.Helm = v
			case "kube-apiserver":
				tools.APIServer = v
			case "kubectl":
				tools.Kubectl = v
			}
		}
	})
	if toolsErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: %v", toolsErr)
		}
		t.Skip(toolsErr)
	}
	return tools
}

// helmEnv keeps helm's configuration, cache and data away from the user's.
func helmEnv() []string {
	base := filepath.Join(os.TempDir(), fmt.Sprintf("wrench-deploytest-helm-%d", os.Getpid()))
	return append(os.Environ(), "HELM_CACHE_HOME="+base+"/cache", "HELM_CONFIG_HOME="+base+"/config",
		"HELM_DATA_HOME="+base+"/data")
}

// chart is a chart directory: its metadata and default values as files,
// and renders by helm.
type chart struct {
	dir       string
	meta      chartMeta
	values    map[string]any
	templates map[string]bool // file names under templates/
	helm      string
	// testCopy is a copy of the chart with one more template that renders
	// NOTES.txt into a ConfigMap, because `helm template` prints no notes.
	testCopy string

	mu    sync.Mutex
	cache map[string]renderResult
}

type renderResult struct {
	r   *rendered
	err error
}

// chartMeta is the part of Chart.yaml the tests read.
type chartMeta struct {
	APIVersion  string `yaml:"apiVersion"`
	Name        string `yaml:"name"`
	Version     string `yaml:"version"`
	AppVersion  string `yaml:"appVersion"`
	Description string `yaml:"description"`
	Type        string `yaml:"type"`
	KubeVersion string `yaml:"kubeVersion"`
}

// rendered is one render: helm's output, its manifests by template file
// name, and NOTES.txt.
type rendered struct {
	raw   string
	files map[string]string
	notes string
}

// notesTemplate renders NOTES.txt (copied to files/) as a ConfigMap's data,
// so that `helm template` shows it.
const notesTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: deploytest-notes
data:
  notes: |
{{ tpl (.Files.Get "files/deploytest-notes.txt") . | indent 4 }}
`

var (
	chartsMu sync.Mutex
	charts   = map[string]*chart{}
)

// loadChart reads the chart at dir (once per test binary) and prepares its
// renders with the real helm.
func loadChart(t *testing.T, dir string) *chart {
	t.Helper()
	tl := needTools(t)
	chartsMu.Lock()
	defer chartsMu.Unlock()
	if c := charts[dir]; c != nil {
		return c
	}
	c := &chart{dir: dir, templates: map[string]bool{}, helm: tl.Helm, cache: map[string]renderResult{}}
	raw, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	must(t, err)
	if err := yaml.Unmarshal(raw, &c.meta); err != nil {
		t.Fatalf("Chart.yaml: %v", err)
	}
	raw, err = os.ReadFile(filepath.Join(dir, "values.yaml"))
	must(t, err)
	if err := yaml.Unmarshal(raw, &c.values); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "templates"))
	must(t, err)
	for _, e := range entries {
		c.templates[e.Name()] = true
	}
	c.testCopy, err = os.MkdirTemp("", "wrench-deploytest-chart-")
	must(t, err)
	tempDirs = append(tempDirs, c.testCopy)
	c.testCopy = filepath.Join(c.testCopy, filepath.Base(dir))
	if out, err := exec.Command("cp", "-r", dir, c.testCopy).CombinedOutput(); err != nil {
		t.Fatalf("copy the chart: %v\n%s", err, out)
	}
	notes, err := os.ReadFile(filepath.Join(dir, "templates", "NOTES.txt"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(c.testCopy, "files", "deploytest-notes.txt"), notes, 0o644))
	must(t, os.WriteFile(filepath.Join(c.testCopy, "templates", "deploytest-notes.yaml"), []byte(notesTemplate), 0o644))
	charts[dir] = c
	return c
}

// tempDirs are removed by TestMain.
var tempDirs []string

// render runs `helm template` on the chart with overrides (YAML values,
// may be empty) over its defaults, for release "wrench" in namespace
// "tools". The error is helm's message when the render fails.
func (c *chart) render(overrides string) (*rendered, error) {
	return c.renderRelease("wrench", overrides)
}

// renderRelease is render for a release of another name.
func (c *chart) renderRelease(release, overrides string) (*rendered, error) {
	key := release + "\x00" + overrides
	c.mu.Lock()
	res, ok := c.cache[key]
	c.mu.Unlock()
	if ok {
		return res.r, res.err
	}
	r, err := c.helmTemplate(release, overrides)
	c.mu.Lock()
	c.cache[key] = renderResult{r, err}
	c.mu.Unlock()
	return r, err
}

func (c *chart) helmTemplate(release, overrides string) (*rendered, error) {
	vf, err := os.CreateTemp("", "wrench-values-*.yaml")
	if err != nil {
		return nil, err
	}
	defer os.Remove(vf.Name())
	vf.WriteString(overrides)
	vf.Close()
	cmd := exec.Command(c.helm, "template", release, c.testCopy, "--namespace", "tools",
		"--kube-version", kubeVersion, "-f", vf.Name())
	cmd.Env = helmEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm template: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return splitRender(stdout.String())
}

// splitRender splits helm's output into files by its "# Source:" lines,
// and takes the notes out of the test's ConfigMap.
func splitRender(out string) (*rendered, error) {
	r := &rendered{files: map[string]string{}}
	var raw strings.Builder
	for _, doc := range strings.Split(out, "\n---\n") {
		doc = strings.TrimPrefix(doc, "---\n")
		first, rest, _ := strings.Cut(doc, "\n")
		file, ok := strings.CutPrefix(first, "# Source: wrench/templates/")
		if !ok {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			return nil, fmt.Errorf("helm output without a Source line:\n%s", doc)
		}
		if file == "deploytest-notes.yaml" {
			var cm struct {
				Data struct{ Notes string } `yaml:"data"`
			}
			if err := yaml.Unmarshal([]byte(rest), &cm); err != nil {
				return nil, fmt.Errorf("notes: %w", err)
			}
			r.notes = cm.Data.Notes
			continue
		}
		raw.WriteString("---\n" + doc + "\n")
		if r.files[file] != "" {
			r.files[file] += "---\n"
		}
		r.files[file] += rest + "\n"
	}
	r.raw = raw.String()
	return r, nil
}

// lint runs `helm lint --strict` with overrides and returns its output.
func (c *chart) lint(overrides string) (string, error) {
	vf, err := os.CreateTemp("", "wrench-values-*.yaml")
	if err != nil {
		return "", err
	}
	defer os.Remove(vf.Name())
	vf.WriteString(overrides)
	vf.Close()
	cmd := exec.Command(c.helm, "lint", "--strict", c.dir, "--namespace", "tools", "--kube-version", kubeVersion, "-f", vf.Name())
	cmd.Env = helmEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// findRepoRoot is the directory holding go.mod above the working directory.
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the test's directory")
		}
		dir = parent
	}
}

// manifest is one Kubernetes object of a render.
type manifest struct {
	file string
	obj  map[string]any
}

func (m manifest) kind() string { return str(m.obj, "kind") }
func (m manifest) name() string { return str(m.obj, "metadata", "name") }

// manifests parses every rendered file as a stream of YAML documents and
// returns the non-empty ones.
func (r *rendered) manifests() ([]manifest, error) {
	names := make([]string, 0, len(r.files))
	for n := range r.files {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []manifest
	for _, n := range names {
		dec := yaml.NewDecoder(strings.NewReader(r.files[n]))
		for {
			var obj map[string]any
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s is not valid YAML: %w\n%s", n, err, numbered(r.files[n]))
			}
			if obj != nil {
				out = append(out, manifest{file: n, obj: obj})
			}
		}
	}
	return out, nil
}

// yamlDocs is every object of r as one multi-document YAML stream.
func (r *rendered) yamlDocs() string {
	names := make([]string, 0, len(r.files))
	for n := range r.files {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString("---\n" + r.files[n])
	}
	return b.String()
}

func numbered(s string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = fmt.Sprintf("%4d %s", i+1, lines[i])
	}
	return strings.Join(lines, "\n")
}

// get walks a decoded YAML tree by map keys and list indexes.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any, path ...any) string {
	s, _ := get(v, path...).(string)
	return s
}

func list(v any, path ...any) []any {
	l, _ := get(v, path...).([]any)
	return l
}
