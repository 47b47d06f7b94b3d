package deploytest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"text/template"

	"gopkg.in/yaml.v3"
)

// This file is a small stand-in for `helm template`: it loads a chart,
// merges values the way Helm does, and executes the templates with
// text/template and the handful of Helm/Sprig functions the Wrench chart
// uses. Values go through JSON as in Helm, so numbers are float64 there
// too (a large integer printed without `int` shows up as 1e+10, as it
// would under Helm).

// chart is a loaded chart directory.
type chart struct {
	dir       string
	meta      chartMeta
	values    map[string]any
	templates map[string]string // file name under templates/ -> text
	files     chartFiles
}

// chartMeta is the part of Chart.yaml templates see as .Chart.
type chartMeta struct {
	APIVersion  string `yaml:"apiVersion"`
	Name        string `yaml:"name"`
	Version     string `yaml:"version"`
	AppVersion  string `yaml:"appVersion"`
	Description string `yaml:"description"`
	Type        string `yaml:"type"`
	KubeVersion string `yaml:"kubeVersion"`
}

// chartFiles is .Files: the chart's non-template files.
type chartFiles map[string][]byte

// Get returns a file's content, or "" when it does not exist (as Helm's).
func (f chartFiles) Get(name string) string { return string(f[name]) }

// release is .Release.
type release struct {
	Name      string
	Namespace string
	Service   string
	IsInstall bool
	IsUpgrade bool
}

// rendered is the output of one render: manifests by template file name,
// and NOTES.txt.
type rendered struct {
	files map[string]string
	notes string
}

func loadChart(t *testing.T, dir string) *chart {
	t.Helper()
	c := &chart{dir: dir, templates: map[string]string{}, files: chartFiles{}}
	raw, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &c.meta); err != nil {
		t.Fatalf("Chart.yaml: %v", err)
	}
	raw, err = os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.values, err = parseValues(raw); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasPrefix(rel, "templates/") {
			c.templates[strings.TrimPrefix(rel, "templates/")] = string(b)
		} else {
			c.files[rel] = b
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// parseValues reads YAML values and passes them through JSON, as Helm does.
func parseValues(raw []byte) (map[string]any, error) {
	var v map[string]any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return jsonRoundTrip(v)
}

func jsonRoundTrip(v map[string]any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = map[string]any{}
	}
	return out, nil
}

// mergeValues returns base overlaid with over: maps merge key by key, other
// values replace, and a nil in over deletes the key (Helm's coalescing).
func mergeValues(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if v == nil {
			delete(out, k)
			continue
		}
		bm, ok1 := out[k].(map[string]any)
		om, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			out[k] = mergeValues(bm, om)
			continue
		}
		out[k] = v
	}
	return out
}

// render executes every template with the chart's values overlaid with
// overrides (YAML text, may be empty).
func (c *chart) render(overrides string) (*rendered, error) {
	over, err := parseValues([]byte(overrides))
	if err != nil {
		return nil, fmt.Errorf("overrides: %w", err)
	}
	values := mergeValues(c.values, over)
	data := map[string]any{
		"Values":  values,
		"Chart":   c.meta,
		"Release": release{Name: "wrench", Namespace: "tools", Service: "Helm", IsInstall: true},
		"Files":   c.files,
	}
	root := template.New("chart").Option("missingkey=zero")
	root.Funcs(helmFuncs(root))
	names := make([]string, 0, len(c.templates))
	for n := range c.templates {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, err := root.New(n).Parse(c.templates[n]); err != nil {
			return nil, fmt.Errorf("parse %s: %w", n, err)
		}
	}
	out := &rendered{files: map[string]string{}}
	for _, n := range names {
		if strings.HasPrefix(n, "_") {
			continue
		}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, n, data); err != nil {
			return nil, fmt.Errorf("render %s: %w", n, err)
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		if n == "NOTES.txt" {
			out.notes = text
			continue
		}
		out.files[n] = text
	}
	return out, nil
}

// helmFuncs are the Helm and Sprig functions the chart uses, with their
// semantics.
func helmFuncs(root *template.Template) template.FuncMap {
	return template.FuncMap{
		"include": func(name string, data any) (string, error) {
			var buf bytes.Buffer
			if err := root.ExecuteTemplate(&buf, name, data); err != nil {
				return "", err
			}
			return buf.String(), nil
		},
		"toYaml": func(v any) (string, error) {
			var buf bytes.Buffer
			enc := yaml.NewEncoder(&buf)
			enc.SetIndent(2)
			if err := enc.Encode(v); err != nil {
				return "", err
			}
			return strings.TrimSuffix(buf.String(), "\n"), nil
		},
		"indent":  indent,
		"nindent": func(n int, s string) string { return "\n" + indent(n, s) },
		"quote": func(vs ...any) string {
			var out []string
			for _, v := range vs {
				if v != nil {
					out = append(out, strconv.Quote(toString(v)))
				}
			}
			return strings.Join(out, " ")
		},
		"default": func(def any, given ...any) any {
			if len(given) == 0 || empty(given[0]) {
				return def
			}
			return given[0]
		},
		"empty": empty,
		"required": func(msg string, v any) (any, error) {
			if v == nil {
				return nil, errors.New(msg)
			}
			if s, ok := v.(string); ok && s == "" {
				return nil, errors.New(msg)
			}
			return v, nil
		},
		"fail": func(msg string) (string, error) { return "", errors.New(msg) },
		"trunc": func(n int, s string) string {
			if n >= 0 && len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"hasPrefix":  func(prefix, s string) bool { return strings.HasPrefix(s, prefix) },
		"contains":   func(substr, s string) bool { return strings.Contains(s, substr) },
		"replace":    func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
		"toString":   toString,
		"trim":       strings.TrimSpace,
		"int":        toInt,
		"add": func(vs ...any) int {
			sum := 0
			for _, v := range vs {
				sum += toInt(v)
			}
			return sum
		},
		"list": func(vs ...any) []any { return vs },
		"has": func(needle any, list []any) bool {
			for _, v := range list {
				if reflect.DeepEqual(v, needle) {
					return true
				}
			}
			return false
		},
		"dict": func(kv ...any) (map[string]any, error) {
			if len(kv)%2 != 0 {
				return nil, errors.New("dict: odd number of arguments")
			}
			m := make(map[string]any, len(kv)/2)
			for i := 0; i < len(kv); i += 2 {
				m[toString(kv[i])] = kv[i+1]
			}
			return m, nil
		},
		"ternary": func(vt, vf any, cond bool) any {
			if cond {
				return vt
			}
			return vf
		},
	}
}

func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

// empty is Sprig's: nil, zero numbers, false, "" and empty collections.
func empty(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String, reflect.Map, reflect.Slice, reflect.Array:
		return rv.Len() == 0
	case reflect.Bool:
		return !rv.Bool()
	case reflect.Int, reflect.Int64, reflect.Int32:
		return rv.Int() == 0
	case reflect.Float64, reflect.Float32:
		return rv.Float() == 0
	}
	return false
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// toInt is Sprig's int: numbers truncate, numeric strings parse, anything
// else is 0.
func toInt(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case int64:
		return int(x)
	case float64:
		return int(x)
	case bool:
		if x {
			return 1
		}
	case string:
		n, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err == nil {
			return int(n)
		}
	}
	return 0
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
