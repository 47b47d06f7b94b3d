package agent_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/task"
)

func TestCodeSearchRanksFilesByTerms(t *testing.T) {
	env := memenv.New(map[string]string{
		"auth/middleware.go": "package auth\n\n// checkToken rejects an expired token.\nfunc checkToken(t *Token) error {\n\tif t.Expiry.Before(now()) {\n\t\treturn ErrExpired\n\t}\n\treturn nil\n}\n",
		"auth/token.go":      "package auth\n\ntype Token struct{ Expiry time.Time }\n",
		"README.md":          "This service checks tokens.\n",
		"main.go":            "package main\n\nfunc main() {}\n",
	})
	cfg := agent.Config{CodeSearch: true}
	_, res := runToolsCfg(t, cfg, env,
		call("search", map[string]any{"query": "where is an expired token rejected (checkToken expiry)"}),
		call("search", map[string]any{"query": "zebra"}),
		call("search", map[string]any{"query": "the of a"}),
	)
	got := res[0]
	if !strings.Contains(got, "\n1. auth/middleware.go (") || !strings.Contains(got, ". auth/token.go (") || strings.Contains(got, "main.go") {
		t.Fatalf("ranking:\n%s", got)
	}
	for _, want := range []string{"checktoken", "reject", "expir", "3: // checkToken rejects an expired token.", "4: func checkToken(t *Token) error {", "5: if t.Expiry.Before(now()) {"} {
		if !strings.Contains(got, want) {
			t.Errorf("result lacks %q:\n%s", want, got)
		}
	}
	if !strings.HasPrefix(res[1], "Nothing matches any of: zebra") || !strings.Contains(res[2], "Error: the query has no searchable words") {
		t.Errorf("results: %q / %q", res[1], res[2])
	}
	// Off by default, on when allowlisted.
	if specs, _ := agent.New(agent.Config{}).Tools(task.ModeNormal, nil); slices.Contains(toolNames(specs), "search") {
		t.Errorf("search offered by default")
	}
	if specs, _ := agent.Tools(task.ModePlan, []string{"search"}); !slices.Contains(toolNames(specs), "search") {
		t.Errorf("allowlisted search not offered in plan mode: %v", toolNames(specs))
	}
}

func TestCodeSearchWeighsRareTermsMore(t *testing.T) {
	env := memenv.New(map[string]string{
		"a.txt": strings.Repeat("alpha\n", 20),
		"b.txt": "alpha\n",
		"c.txt": "alpha\n",
		"z.txt": "zeta\n",
		"y.txt": "alpha zeta\n",
	})
	_, res := runToolsCfg(t, agent.Config{CodeSearch: true}, env, call("search", map[string]any{"query": "alpha zeta"}))
	var order []string
	for _, line := range strings.Split(res[0], "\n") {
		if i := strings.Index(line, ". "); i > 0 && i < 3 {
			order = append(order, strings.Fields(line[i+2:])[0])
		}
	}
	if len(order) != 5 || order[0] != "y.txt" || order[1] != "z.txt" || order[2] != "a.txt" {
		t.Errorf("order = %v\n%s", order, res[0])
	}
}
