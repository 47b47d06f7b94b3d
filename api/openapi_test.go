package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wrenchworks/wrench/task"
)

// openAPIPath is the HTTP API reference this file checks.
const openAPIPath = "../docs/api/openapi.yaml"

// spec is the parsed document, as generic YAML.
type spec map[string]any

func loadSpec(t *testing.T) spec {
	t.Helper()
	b, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatalf("the API reference is missing: %v", err)
	}
	var m map[string]any // not spec: yaml.v3 would give nested maps that type
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s is not YAML: %v", openAPIPath, err)
	}
	return spec(m)
}

func node(v any, keys ...string) map[string]any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	m, _ := v.(map[string]any)
	return m
}

// resolve follows a local $ref.
func (s spec) resolve(v map[string]any) map[string]any {
	ref, ok := v["$ref"].(string)
	if !ok {
		return v
	}
	return node(map[string]any(s), strings.Split(strings.TrimPrefix(ref, "#/"), "/")...)
}

var methods = []string{"get", "post", "put", "patch", "delete"}

// operations returns "METHOD /path" -> operation, and which are optional
// (x-optional: mounted only in some configurations).
func (s spec) operations() (map[string]map[string]any, map[string]bool) {
	ops, optional := map[string]map[string]any{}, map[string]bool{}
	for path, item := range node(map[string]any(s), "paths") {
		for _, m := range methods {
			op := node(item, m)
			if op == nil {
				continue
			}
			key := strings.ToUpper(m) + " " + path
			ops[key] = op
			if opt, _ := op["x-optional"].(bool); opt {
				optional[key] = true
			}
		}
	}
	return ops, optional
}

// TestOpenAPIRoutes: the reference documents exactly the routes the server
// answers.
func TestOpenAPIRoutes(t *testing.T) {
	s := loadSpec(t)
	srv, err := NewServer(Config{Submitter: newFake(), States: newFake(), Events: newFake(),
		Metrics: http.NotFoundHandler()})
	if err != nil {
		t.Fatal(err)
	}
	ops, optional := s.operations()
	var documented []string
	for k := range ops {
		if !optional[k] {
			documented = append(documented, k)
		}
	}
	sort.Strings(documented)
	if got := srv.Routes(); !slices.Equal(got, documented) {
		t.Errorf("server routes %q,\ndocumented %q", got, documented)
	}
}

// schemaTypes maps every schema of the reference to the Go type it
// describes.
var schemaTypes = map[string]reflect.Type{
	"Task": reflect.TypeFor[task.Task](), "Repo": reflect.TypeFor[task.Repo](), "Limits": reflect.TypeFor[task.Limits](),
	"SandboxOptions": reflect.TypeFor[task.SandboxOptions](), "Output": reflect.TypeFor[task.Output](),
	"PullRequest": reflect.TypeFor[task.PullRequest](), "Source": reflect.TypeFor[task.Source](),
	"Grading": reflect.TypeFor[task.Grading](), "TestSelection": reflect.TypeFor[task.TestSelection](),
	"Result": reflect.TypeFor[task.Result](), "SetupRun": reflect.TypeFor[task.SetupRun](),
	"EgressSummary": reflect.TypeFor[task.EgressSummary](), "TestRun": reflect.TypeFor[task.TestRun](),
	"Usage": reflect.TypeFor[task.Usage](), "Timings": reflect.TypeFor[task.Timings](), "Grade": reflect.TypeFor[task.Grade](),
	"TestOutcome": reflect.TypeFor[task.TestOutcome](), "Status": reflect.TypeFor[task.Status](),
	"Progress": reflect.TypeFor[task.Progress](), "Event": reflect.TypeFor[task.Event](),
	"EgressConnection": reflect.TypeFor[task.EgressConnection](), "FieldError": reflect.TypeFor[task.FieldError](),
	"Error": reflect.TypeFor[ErrorBody](), "TaskList": reflect.TypeFor[ListResponse](),
	"Pause": reflect.TypeFor[task.Pause](), "BudgetAccount": reflect.TypeFor[task.BudgetAccount](),
}

// TestOpenAPISchemas: every field of a task, a result, a status, an event
// and an error is in the reference with its JSON type, and nothing else is.
func TestOpenAPISchemas(t *testing.T) {
	s := loadSpec(t)
	schemas := node(map[string]any(s), "components", "schemas")
	for name := range schemas {
		if schemaTypes[name] == nil {
			t.Errorf("schema %s describes no Go type (stale?)", name)
		}
	}
	for name, typ := range schemaTypes {
		sc := node(schemas, name)
		if sc == nil {
			t.Errorf("no schema %s for %s", name, typ)
			continue
		}
		props := node(sc, "properties")
		var required []string
		list, _ := sc["required"].([]any)
		for _, r := range list {
			required = append(required, r.(string))
		}
		var fields, wantRequired []string
		for i := range typ.NumField() {
			f := typ.Field(i)
			jname, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if jname == "" || jname == "-" {
				continue
			}
			fields = append(fields, jname)
			if !strings.Contains(opts, "omitempty") {
				wantRequired = append(wantRequired, jname)
			}
			p := node(props, jname)
			if p == nil {
				t.Errorf("%s: field %s (%s) is not documented", name, jname, f.Name)
				continue
			}
			if problem := typeMismatch(f.Type, p); problem != "" {
				t.Errorf("%s.%s: %s", name, jname, problem)
			}
		}
		for p := range props {
			if !slices.Contains(fields, p) {
				t.Errorf("%s: documented property %s is not a field of %s", name, p, typ)
			}
		}
		slices.Sort(required)
		slices.Sort(wantRequired)
		if !slices.Equal(required, wantRequired) {
			t.Errorf("%s: required %v, want %v (the fields without omitempty)", name, required, wantRequired)
		}
	}
}

// typeMismatch says how a property's schema differs from the Go type's
// JSON form ("" when it fits).
func typeMismatch(typ reflect.Type, p map[string]any) string {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if ref, ok := p["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		if schemaTypes[name] != typ {
			return fmt.Sprintf("$ref %s, but the field is a %s", name, typ)
		}
		return ""
	}
	want := ""
	switch {
	case typ == reflect.TypeFor[time.Time](), typ == reflect.TypeFor[task.Duration]():
		want = "string"
	case typ == reflect.TypeFor[time.Duration]():
		want = "integer"
	default:
		switch typ.Kind() {
		case reflect.String:
			want = "string"
		case reflect.Bool:
			want = "boolean"
		case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Int32:
			want = "integer"
		case reflect.Float64:
			want = "number"
		case reflect.Slice:
			if p["type"] != "array" {
				return fmt.Sprintf("type %v, want array", p["type"])
			}
			return typeMismatch(typ.Elem(), node(p, "items"))
		case reflect.Struct:
			return fmt.Sprintf("struct %s has no schema", typ)
		}
	}
	if p["type"] != want {
		return fmt.Sprintf("type %v, want %s (%s)", p["type"], want, typ)
	}
	return ""
}

// scenario is one request and the server it goes to.
type scenario struct {
	name, op, path string
	header         map[string]string
	body           string
	broken         error // the backend fails with this
}

// TestOpenAPIAnswers runs one request for every documented answer of every
// route against the real server, and checks that each answer is
// documented for its route, with a body that fits the documented schema.
func TestOpenAPIAnswers(t *testing.T) {
	s := loadSpec(t)
	ops, optional := s.operations()
	auth := map[string]string{"Authorization": "Bearer tok"}
	big := `{"repo":{"url":"/r"},"instruction":"` + strings.Repeat("x", 5000) + `"}`
	scenarios := []scenario{
		{"submit", "POST /v1/tasks", "/v1/tasks", auth, validTask, nil},
		{"submit again", "POST /v1/tasks", "/v1/tasks", auth, validTask, nil},
		{"submit invalid", "POST /v1/tasks", "/v1/tasks", auth, `{"repo":{"url":""},"instruction":""}`, nil},
		{"submit without token", "POST /v1/tasks", "/v1/tasks", nil, validTask, nil},
		{"submit refused by policy", "POST /v1/tasks", "/v1/tasks", auth, `{"repo":{"url":"https://forbidden.example/x.git"},"instruction":"x"}`, nil},
		{"submit too large", "POST /v1/tasks", "/v1/tasks", auth, big, nil},
		{"submit, store down", "POST /v1/tasks", "/v1/tasks", auth, validTask, &task.SubmitError{TaskID: "t-1", Kind: task.ErrUnconfirmed, Err: errors.New("timeout")}},
		{"submit, store broken", "POST /v1/tasks", "/v1/tasks", auth, validTask, errors.New("boom")},
		{"list", "GET /v1/tasks", "/v1/tasks?state=resolved&limit=2", auth, "", nil},
		{"list invalid", "GET /v1/tasks", "/v1/tasks?limit=0", auth, "", nil},
		{"list without token", "GET /v1/tasks", "/v1/tasks", nil, "", nil},
		{"list, store broken", "GET /v1/tasks", "/v1/tasks", auth, "", errors.New("boom")},
		{"status", "GET /v1/tasks/{id}", "/v1/tasks/t-done", auth, "", nil},
		{"status unknown", "GET /v1/tasks/{id}", "/v1/tasks/t-nope", auth, "", nil},
		{"status without token", "GET /v1/tasks/{id}", "/v1/tasks/t-done", nil, "", nil},
		{"status, store broken", "GET /v1/tasks/{id}", "/v1/tasks/t-done", auth, "", errors.New("boom")},
		{"events", "GET /v1/tasks/{id}/events", "/v1/tasks/t-done/events", auth, "", nil},
		{"events bad resume", "GET /v1/tasks/{id}/events", "/v1/tasks/t-done/events?after=x", auth, "", nil},
		{"events unknown", "GET /v1/tasks/{id}/events", "/v1/tasks/t-nope/events", auth, "", nil},
		{"events without token", "GET /v1/tasks/{id}/events", "/v1/tasks/t-done/events", nil, "", nil},
		{"events, store broken", "GET /v1/tasks/{id}/events", "/v1/tasks/t-done/events", auth, "", errors.New("boom")},
		{"patch", "GET /v1/tasks/{id}/patch", "/v1/tasks/t-done/patch", auth, "", nil},
		{"no patch", "GET /v1/tasks/{id}/patch", "/v1/tasks/t-empty/patch", auth, "", nil},
		{"patch not final", "GET /v1/tasks/{id}/patch", "/v1/tasks/t-run/patch", auth, "", nil},
		{"patch unknown", "GET /v1/tasks/{id}/patch", "/v1/tasks/t-nope/patch", auth, "", nil},
		{"patch without token", "GET /v1/tasks/{id}/patch", "/v1/tasks/t-done/patch", nil, "", nil},
		{"patch, store broken", "GET /v1/tasks/{id}/patch", "/v1/tasks/t-done/patch", auth, "", errors.New("boom")},
		{"artifact", "GET /v1/tasks/{id}/artifacts/{name}", "/v1/tasks/t-done/artifacts/log.txt", auth, "", nil},
		{"artifact bad name", "GET /v1/tasks/{id}/artifacts/{name}", "/v1/tasks/t-done/artifacts/.env", auth, "", nil},
		{"artifact missing", "GET /v1/tasks/{id}/artifacts/{name}", "/v1/tasks/t-done/artifacts/core", auth, "", nil},
		{"artifact not final", "GET /v1/tasks/{id}/artifacts/{name}", "/v1/tasks/t-run/artifacts/log.txt", auth, "", nil},
		{"artifact without token", "GET /v1/tasks/{id}/artifacts/{name}", "/v1/tasks/t-done/artifacts/log.txt", nil, "", nil},
		{"artifact, store broken", "GET /v1/tasks/{id}/artifacts/{name}", "/v1/tasks/t-done/artifacts/log.txt", auth, "", errors.New("boom")},
		{"cancel final", "POST /v1/tasks/{id}/cancel", "/v1/tasks/t-done/cancel", auth, "", nil},
		{"cancel running", "POST /v1/tasks/{id}/cancel", "/v1/tasks/t-run/cancel", auth, "", nil},
		{"cancel unknown", "POST /v1/tasks/{id}/cancel", "/v1/tasks/t-nope/cancel", auth, "", nil},
		{"cancel without token", "POST /v1/tasks/{id}/cancel", "/v1/tasks/t-run/cancel", nil, "", nil},
		{"cancel, store broken", "POST /v1/tasks/{id}/cancel", "/v1/tasks/t-run/cancel", auth, "", errors.New("boom")},
		{"resume", "POST /v1/tasks/{id}/resume", "/v1/tasks/t-paused/resume", auth, "", nil},
		{"resume not paused", "POST /v1/tasks/{id}/resume", "/v1/tasks/t-run/resume", auth, "", nil},
		{"resume unknown", "POST /v1/tasks/{id}/resume", "/v1/tasks/t-nope/resume", auth, "", nil},
		{"resume without token", "POST /v1/tasks/{id}/resume", "/v1/tasks/t-paused/resume", nil, "", nil},
		{"resume, store broken", "POST /v1/tasks/{id}/resume", "/v1/tasks/t-paused/resume", auth, "", errors.New("boom")},
		{"health", "GET /healthz", "/healthz", nil, "", nil},
		{"ready", "GET /readyz", "/readyz", nil, "", nil},
		{"not ready", "GET /readyz", "/readyz", nil, "", errors.New("nats down")},
		{"metrics", "GET /metrics", "/metrics", nil, "", nil},
	}
	seen := map[string]bool{}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			op := ops[sc.op]
			if op == nil {
				t.Fatalf("%s is not documented", sc.op)
			}
			code, ctype, body := sendScenario(t, sc)
			key := fmt.Sprintf("%s %d", sc.op, code)
			seen[key] = true
			resp := s.resolve(node(op, "responses", fmt.Sprint(code)))
			if resp == nil {
				t.Fatalf("%s answered %d, which is not documented (%s)", sc.op, code, body)
			}
			content := node(resp, "content")
			if len(content) == 0 {
				if len(body) > 0 {
					t.Errorf("%d is documented without a body, but the server sent %q", code, body)
				}
				return
			}
			mt := strings.TrimSpace(strings.Split(ctype, ";")[0])
			schema := s.resolve(node(content, mt, "schema"))
			if schema == nil {
				if _, any := content["application/octet-stream"]; !any {
					t.Errorf("content type %s is not documented for %d (documented: %v)", mt, code, keys(content))
				}
				return
			}
			if mt == "application/json" {
				checkJSON(t, s, schema, body)
			}
		})
	}
	for op := range ops {
		if optional[op] {
			continue
		}
		for code := range node(ops[op], "responses") {
			if !seen[op+" "+code] {
				t.Errorf("%s %s is documented but no scenario produced it", op, code)
			}
		}
	}
}

// sendScenario sends a scenario's request to a server set up for it.
func sendScenario(t *testing.T, sc scenario) (int, string, []byte) {
	t.Helper()
	f := newFake()
	f.put(task.Status{TaskID: "t-run", State: task.StateRunning})
	f.put(task.Status{TaskID: "t-done", State: task.StateResolved, Result: &task.Result{TaskID: "t-done", Status: task.StateResolved,
		Patch: "--- a/x\n+++ b/x\n", Artifacts: []string{"log.txt"}}})
	f.put(task.Status{TaskID: "t-empty", State: task.StateUnresolved, Result: &task.Result{TaskID: "t-empty", Status: task.StateUnresolved}})
	f.artifacts["t-done/log.txt"] = []byte("log\n")
	f.emit(task.Event{TaskID: "t-done", Kind: task.EventResult, State: task.StateResolved})
	f.put(task.Status{TaskID: "t-1", State: task.StateQueued})
	f.put(task.Status{TaskID: "t-paused", State: task.StatePaused, Reason: task.ReasonBudget, Spent: &task.Usage{CostUSD: 1},
		Pause: &task.Pause{Reason: task.ReasonBudget, Account: task.BudgetAccount{Scope: task.BudgetRepository, Name: "https://example.com/r", DailyUSD: 5},
			Day: "2030-01-02", SpentUSD: 4.99, NeedUSD: 0.2, At: time.Now(), Free: 1, Artifacts: []string{"patch.diff"}}})
	if sc.name == "submit" {
		delete(f.tasks, "t-1")
	}
	cfg := Config{Submitter: f, States: f, Events: f, Artifacts: f, Token: "tok", MaxBody: 4096,
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up 1\n") }),
		Admit: func(tk task.Task) error {
			if strings.Contains(tk.Repo.URL, "forbidden") {
				return errors.New("the policy does not allow this repository")
			}
			return nil
		}}
	if sc.broken != nil {
		if sc.op == "GET /readyz" {
			cfg.Ready = func(context.Context) error { return sc.broken }
		} else {
			f.failWith = sc.broken
		}
	}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	method, _, _ := strings.Cut(sc.op, " ")
	req, _ := http.NewRequest(method, srv.URL+sc.path, strings.NewReader(sc.body))
	for k, v := range sc.header {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

// checkJSON checks that a JSON body's fields are documented properties of
// schema, recursively through objects, arrays and $refs.
func checkJSON(t *testing.T, s spec, schema map[string]any, body []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, body)
	}
	var walk func(path string, v any, sc map[string]any)
	walk = func(path string, v any, sc map[string]any) {
		sc = s.resolve(sc)
		switch v := v.(type) {
		case map[string]any:
			props := node(sc, "properties")
			for k, sub := range v {
				p := node(props, k)
				if p == nil {
					t.Errorf("%s.%s is not a documented property", path, k)
					continue
				}
				walk(path+"."+k, sub, p)
			}
		case []any:
			for i, sub := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), sub, node(sc, "items"))
			}
		}
	}
	walk("body", v, schema)
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestOpenAPIListLimits keeps the documented page size in step with the
// task package's.
func TestOpenAPIListLimits(t *testing.T) {
	s := loadSpec(t)
	for _, p := range node(map[string]any(s), "paths", "/v1/tasks", "get")["parameters"].([]any) {
		p := p.(map[string]any)
		if p["name"] != "limit" {
			continue
		}
		sc := node(p, "schema")
		if sc["maximum"] != task.MaxListLimit || sc["default"] != task.DefaultListLimit {
			t.Errorf("limit: maximum %v default %v, want %d and %d", sc["maximum"], sc["default"], task.MaxListLimit, task.DefaultListLimit)
		}
		return
	}
	t.Error("GET /v1/tasks documents no limit parameter")
}
