package deploytest

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// validate checks v (JSON-decoded) against the subset of JSON Schema the
// chart's values.schema.json uses: type, properties, additionalProperties,
// required, enum, pattern, minLength, minimum, items. It returns one line
// per violation.
func validate(schema map[string]any, v any, path string) []string {
	var errs []string
	if t, ok := schema["type"]; ok && !typeMatches(t, v) {
		return []string{fmt.Sprintf("%s: %v is not of type %v", path, v, t)}
	}
	if enum, ok := schema["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if e == v {
				found = true
			}
		}
		if !found {
			errs = append(errs, fmt.Sprintf("%s: %v is not one of %v", path, v, enum))
		}
	}
	switch x := v.(type) {
	case string:
		if p, ok := schema["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(x) {
			errs = append(errs, fmt.Sprintf("%s: %q does not match %s", path, x, p))
		}
		if n, ok := schema["minLength"].(float64); ok && float64(len(x)) < n {
			errs = append(errs, fmt.Sprintf("%s: %q is shorter than %v", path, x, n))
		}
	case float64:
		if n, ok := schema["minimum"].(float64); ok && x < n {
			errs = append(errs, fmt.Sprintf("%s: %v is less than %v", path, x, n))
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, e := range x {
				errs = append(errs, validate(items, e, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		for _, r := range list(schema, "required") {
			if _, ok := x[r.(string)]; !ok {
				errs = append(errs, fmt.Sprintf("%s: %s is required", path, r))
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if ps, ok := props[k].(map[string]any); ok {
				errs = append(errs, validate(ps, x[k], path+"."+k)...)
				continue
			}
			switch ap := schema["additionalProperties"].(type) {
			case bool:
				if !ap {
					errs = append(errs, fmt.Sprintf("%s: unknown key %q", path, k))
				}
			case map[string]any:
				errs = append(errs, validate(ap, x[k], path+"."+k)...)
			}
		}
	}
	return errs
}

func typeMatches(t, v any) bool {
	if ts, ok := t.([]any); ok {
		for _, one := range ts {
			if typeMatches(one, v) {
				return true
			}
		}
		return false
	}
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == math.Trunc(f)
	case "null":
		return v == nil
	}
	return false
}

func loadSchema(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir(t), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	return s
}

// TestValuesSchema checks that the defaults and every scenario's values
// satisfy values.schema.json (which Helm enforces on install), and that the
// schema catches typos and impossible values.
func TestValuesSchema(t *testing.T) {
	c := loadChart(t, chartDir(t))
	schema := loadSchema(t)
	if errs := validate(schema, c.values, "values"); len(errs) > 0 {
		t.Errorf("values.yaml breaks its schema:\n%s", strings.Join(errs, "\n"))
	}
	for _, sc := range scenarios {
		over, err := parseValues([]byte(sc.values))
		if err != nil {
			t.Fatal(err)
		}
		if errs := validate(schema, mergeValues(c.values, over), "values"); len(errs) > 0 {
			t.Errorf("%s: values break the schema:\n%s", sc.name, strings.Join(errs, "\n"))
		}
	}
	for _, tc := range []struct{ values, want string }{
		{"docker: {mod: dind}", `values.docker: unknown key "mod"`},
		{"mode: cluster", "values.mode: cluster is not one of"},
		{"wrench: {slots: 0}", "values.wrench.slots: 0 is less than 1"},
		{"wrench: {slots: 1.5}", "is not of type integer"},
		{"dataDir: var/lib/wrench", `values.dataDir: "var/lib/wrench" does not match ^/`},
		{"wrench: {grace: 30s}", `values.wrench: unknown key "grace"`},
		{"secrets: {apiToken: hunter2}", `values.secrets: unknown key "apiToken"`},
	} {
		over, err := parseValues([]byte(tc.values))
		if err != nil {
			t.Fatal(err)
		}
		errs := validate(schema, mergeValues(c.values, over), "values")
		if !strings.Contains(strings.Join(errs, "\n"), tc.want) {
			t.Errorf("%s: schema errors %v, want one containing %q", tc.values, errs, tc.want)
		}
	}
}
