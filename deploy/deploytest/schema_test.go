package deploytest

import (
	"strings"
	"testing"
)

// TestValuesSchema checks that helm enforces values.schema.json: the
// defaults and every scenario render (helm validates them first), and
// typos and impossible values are refused naming the value.
func TestValuesSchema(t *testing.T) {
	c := loadChart(t, chartDir(t))
	for _, sc := range scenarios {
		if _, err := c.render(sc.values); err != nil {
			t.Errorf("%s: %v", sc.name, err)
		}
	}
	for _, tc := range []struct{ values, want string }{
		{"docker: {mod: dind}", "'mod'"},
		{"mode: cluster", "at '/mode'"},
		{"wrench: {slots: 0}", "at '/wrench/slots'"},
		{"wrench: {slots: 1.5}", "at '/wrench/slots'"},
		{"dataDir: var/lib/wrench", "at '/dataDir'"},
		{"wrench: {grace: 30s}", "'grace'"},
		{"secrets: {apiToken: hunter2}", "'apiToken'"},
	} {
		_, err := c.render(secretValues + tc.values)
		if err == nil || !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want a schema error naming %q", tc.values, err, tc.want)
		}
	}
}
