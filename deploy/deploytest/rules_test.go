package deploytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func loadRules(t *testing.T) ruleFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir(t), "prometheus", "wrench-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(raw, &rf); err != nil {
		t.Fatalf("wrench-rules.yaml: %v", err)
	}
	return rf
}

// TestRulesMetricsExist checks the alert expressions, and the queries
// their annotations run, against the exported metrics; and that every
// alert has a severity and a runbook that exists in docs/operations.md.
func TestRulesMetricsExist(t *testing.T) {
	fams := exportedFamilies(t)
	rf := loadRules(t)
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := markdownAnchors(string(doc))
	annotationQuery := regexp.MustCompile(`query "((?:[^"\\]|\\.)*)"`)
	alerts := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			for _, p := range checkQuery(fams, r.Expr) {
				t.Errorf("alert %s: %s\n  %s", r.Alert, p, r.Expr)
			}
			for _, a := range r.Annotations {
				for _, m := range annotationQuery.FindAllStringSubmatch(a, -1) {
					for _, p := range checkQuery(fams, m[1]) {
						t.Errorf("alert %s annotation query: %s\n  %s", r.Alert, p, m[1])
					}
				}
			}
			switch r.Labels["severity"] {
			case "critical", "warning", "info":
			default:
				t.Errorf("alert %s: severity %q", r.Alert, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s lacks summary or description", r.Alert)
			}
			_, anchor, ok := strings.Cut(r.Annotations["runbook_url"], "docs/operations.md#")
			if !ok || !anchors[anchor] {
				t.Errorf("alert %s: runbook_url %q does not point at a heading of docs/operations.md", r.Alert, r.Annotations["runbook_url"])
			}
		}
	}
	for _, want := range []string{"WrenchDeadLetters", "WrenchNoFreeSlots", "WrenchTaskFailureRatioHigh", "WrenchSandboxStartFailures"} {
		if !alerts[want] {
			t.Errorf("no alert %s", want)
		}
	}
}

// markdownAnchors returns the GitHub anchors of a document's headings.
func markdownAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		h = drop.ReplaceAllString(h, "")
		out[strings.ReplaceAll(h, " ", "-")] = true
	}
	return out
}

// promtool returns promtool's path; it skips the test when it is missing,
// except under CI=true (make test installs it through scripts/deps.sh).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not found (CI=true): install the Debian package prometheus (make deps)")
		}
		t.Skip("promtool not found: apt-get install prometheus (make deps); TestRulesMetricsExist still checks the names")
	}
	return p
}

// TestRulesPromtool runs `promtool check rules`, the rules' unit tests
// (deploy/prometheus/wrench-rules.test.yaml) and `promtool check config` on
// the Compose Prometheus configuration.
func TestRulesPromtool(t *testing.T) {
	bin := promtool(t)
	dir := filepath.Join(deployDir(t), "prometheus")
	for _, args := range [][]string{
		{"check", "rules", "wrench-rules.yaml"},
		{"test", "rules", "wrench-rules.test.yaml"},
		{"check", "config", "prometheus.yml"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
