// Package repoconfig reads a repository's own Wrench configuration, the
// `.wrench.yaml` file at the root of its tree: the base image and extra
// Debian packages, the setup commands that prepare its environment, its test
// command, non-secret environment variables, the hosts its setup needs to
// reach, its limits and its instruction files.
//
// Decoding is strict: an unknown field, a value of the wrong type or
// trailing documents are errors that name the line and the field, so a typo
// is reported rather than ignored. The schema is documented in
// docs/environments.md.
//
// The file says what the repository asks for; the server policy (package
// policy) decides what it gets.
package repoconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// FileName is where the file lives in a repository's tree.
const FileName = ".wrench.yaml"

// MaxFileBytes bounds the file; a larger one is refused unread.
const MaxFileBytes = 64 << 10

// File is a decoded `.wrench.yaml`. Zero values mean "not set": the server
// policy's defaults apply.
type File struct {
	// Image is the base image, or extra Debian packages on the default one.
	Image Image
	// Setup are shell commands run in the sandbox after the clone and before
	// the baseline tests, in order; the first failure ends the setup.
	Setup []string
	// SetupUser is "root" when setup must run as root (to install system
	// packages); empty means the sandbox's unprivileged user. The server
	// policy decides whether root is allowed.
	SetupUser string
	// SetupTimeout bounds the whole setup; 0 means the policy's default.
	SetupTimeout time.Duration
	// Test is the verification command, run before and after the agent.
	Test string
	// TestTimeout bounds one run of Test; 0 means the policy's default.
	TestTimeout time.Duration
	// Env are non-secret environment variables for setup, tests and the agent.
	Env map[string]string
	// Egress are the hosts (exact, or "*.example.com") setup needs beyond
	// the ecosystem defaults of the server policy.
	Egress []string
	// AgentEgress are the hosts the agent phase may reach; the server policy
	// must allow each of them.
	AgentEgress []string
	// Limits are the repository's limits; the server's caps win.
	Limits Limits
	// Instructions are instruction files given to the agent (default
	// AGENTS.md and .wrench/instructions.md).
	Instructions []string
	// Manifests are extra files (paths or globs relative to the root) whose
	// contents key the environment snapshot, beside the built-in list of
	// manifests and lockfiles.
	Manifests []string
	// Lines records the line each top-level field was set on, for messages.
	Lines map[string]int
}

// Image is the sandbox image a repository asks for.
type Image struct {
	// Base is an image name; empty means the server's default image.
	Base string
	// Packages are Debian packages installed (as root, through the egress
	// proxy) on top of Base before setup runs.
	Packages []string
}

// Limits are a repository's requested limits. Zero means "not set".
type Limits struct {
	MaxTurns   int
	MaxCostUSD float64
	MaxTokens  int64
	Timeout    time.Duration
	MemoryMB   int64
	CPUs       float64
	Pids       int64
	DiskMB     int64
}

// Error reports what is wrong with a file: the line, the field and the
// problem. Callers branch on it (errors.As) to reject the task.
type Error struct {
	Line    int
	Field   string
	Problem string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(FileName)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Problem)
	return b.String()
}

// Fields lists the top-level keys the file accepts, in documentation order.
var Fields = []string{"image", "setup", "setup_user", "setup_timeout", "test", "test_timeout", "env", "egress", "agent_egress", "limits", "instructions", "manifests"}

var limitFields = []string{"max_turns", "max_cost_usd", "max_tokens", "timeout", "memory_mb", "cpus", "pids", "disk_mb"}

// Parse decodes a `.wrench.yaml`. An empty file is a valid, empty
// configuration. Every error is an *Error.
func Parse(data []byte) (*File, error) {
	if len(data) > MaxFileBytes {
		return nil, &Error{Problem: fmt.Sprintf("is %d bytes; the limit is %d", len(data), MaxFileBytes)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &File{Lines: map[string]int{}}, nil
		}
		return nil, syntaxError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{Line: extra.Line, Problem: "holds more than one YAML document"}
	} else if !errors.Is(err, io.EOF) {
		return nil, syntaxError(err)
	}
	f := &File{Lines: map[string]int{}}
	if len(doc.Content) == 0 {
		return f, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return f, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, &Error{Line: root.Line, Problem: "must be a mapping of fields (" + strings.Join(Fields, ", ") + ")"}
	}
	if err := f.decode(root); err != nil {
		return nil, err
	}
	return f, f.check()
}

// syntaxError turns a YAML parser error ("yaml: line 3: …") into an *Error.
func syntaxError(err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	e := &Error{Problem: msg}
	if n, rest, ok := cutLine(msg); ok {
		e.Line, e.Problem = n, rest
	}
	return e
}

func cutLine(msg string) (int, string, bool) {
	var n int
	if _, err := fmt.Sscanf(msg, "line %d:", &n); err != nil {
		return 0, "", false
	}
	_, rest, _ := strings.Cut(msg, ":")
	return n, strings.TrimSpace(rest), true
}

func (f *File) decode(root *yaml.Node) error {
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		key := k.Value
		if seen[key] {
			return &Error{Line: k.Line, Field: key, Problem: "is set twice"}
		}
		seen[key] = true
		f.Lines[key] = k.Line
		var err error
		switch key {
		case "image":
			err = decodeImage(v, &f.Image)
		case "setup":
			f.Setup, err = decodeCommands(v, key)
		case "setup_user":
			err = decodeScalar(v, key, &f.SetupUser)
		case "setup_timeout":
			f.SetupTimeout, err = decodeDuration(v, key)
		case "test":
			err = decodeScalar(v, key, &f.Test)
		case "test_timeout":
			f.TestTimeout, err = decodeDuration(v, key)
		case "env":
			f.Env, err = decodeEnv(v)
		case "egress":
			f.Egress, err = decodeList(v, key)
		case "agent_egress":
			f.AgentEgress, err = decodeList(v, key)
		case "limits":
			err = decodeLimits(v, &f.Limits)
		case "instructions":
			f.Instructions, err = decodeList(v, key)
		case "manifests":
			f.Manifests, err = decodeList(v, key)
		default:
			return &Error{Line: k.Line, Field: key, Problem: "unknown field" + suggest(key, Fields) + " (known: " + strings.Join(Fields, ", ") + ")"}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// suggest names the known field closest to a misspelt one, if any is close.
func suggest(got string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(got, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func typeError(v *yaml.Node, field, want string) error {
	got := v.Tag
	switch v.Kind {
	case yaml.MappingNode:
		got = "a mapping"
	case yaml.SequenceNode:
		got = "a list"
	case yaml.ScalarNode:
		got = fmt.Sprintf("%q", v.Value)
	}
	return &Error{Line: v.Line, Field: field, Problem: "want " + want + ", got " + got}
}

func decodeScalar(v *yaml.Node, field string, out *string) error {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		return typeError(v, field, "a string")
	}
	*out = v.Value
	return nil
}

func decodeDuration(v *yaml.Node, field string) (time.Duration, error) {
	if v.Kind != yaml.ScalarNode {
		return 0, typeError(v, field, `a duration such as "10m"`)
	}
	d, err := time.ParseDuration(v.Value)
	if err != nil || d < 0 {
		return 0, typeError(v, field, `a duration such as "10m"`)
	}
	return d, nil
}

func decodeList(v *yaml.Node, field string) ([]string, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, typeError(v, field, "a list of strings")
	}
	out := make([]string, 0, len(v.Content))
	for i, e := range v.Content {
		if e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
			return nil, typeError(e, fmt.Sprintf("%s[%d]", field, i), "a string")
		}
		out = append(out, e.Value)
	}
	return out, nil
}

// decodeCommands reads a list of commands or one multi-line string (a
// script: run as one command, so its lines share shell state).
func decodeCommands(v *yaml.Node, field string) ([]string, error) {
	if v.Kind == yaml.ScalarNode && v.Tag != "!!null" {
		if strings.TrimSpace(v.Value) == "" {
			return nil, nil
		}
		return []string{v.Value}, nil
	}
	return decodeList(v, field)
}

func decodeEnv(v *yaml.Node) (map[string]string, error) {
	if v.Kind != yaml.MappingNode {
		return nil, typeError(v, "env", "a mapping of NAME: value")
	}
	out := map[string]string{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		field := "env." + k.Value
		if val.Kind != yaml.ScalarNode {
			return nil, typeError(val, field, "a string")
		}
		if _, dup := out[k.Value]; dup {
			return nil, &Error{Line: k.Line, Field: field, Problem: "is set twice"}
		}
		out[k.Value] = val.Value
	}
	return out, nil
}

func decodeImage(v *yaml.Node, out *Image) error {
	if v.Kind == yaml.ScalarNode && v.Tag != "!!null" {
		out.Base = v.Value
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return typeError(v, "image", "an image name or a mapping with base and packages")
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		var err error
		switch k.Value {
		case "base":
			err = decodeScalar(val, "image.base", &out.Base)
		case "packages":
			out.Packages, err = decodeList(val, "image.packages")
		default:
			return &Error{Line: k.Line, Field: "image." + k.Value, Problem: "unknown field" + suggest(k.Value, []string{"base", "packages"}) + " (known: base, packages)"}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func decodeLimits(v *yaml.Node, out *Limits) error {
	if v.Kind != yaml.MappingNode {
		return typeError(v, "limits", "a mapping ("+strings.Join(limitFields, ", ")+")")
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		field := "limits." + k.Value
		var err error
		switch k.Value {
		case "max_turns":
			err = decodeNumber(val, field, &out.MaxTurns)
		case "max_cost_usd":
			err = decodeNumber(val, field, &out.MaxCostUSD)
		case "max_tokens":
			err = decodeNumber(val, field, &out.MaxTokens)
		case "timeout":
			out.Timeout, err = decodeDuration(val, field)
		case "memory_mb":
			err = decodeNumber(val, field, &out.MemoryMB)
		case "cpus":
			err = decodeNumber(val, field, &out.CPUs)
		case "pids":
			err = decodeNumber(val, field, &out.Pids)
		case "disk_mb":
			err = decodeNumber(val, field, &out.DiskMB)
		default:
			return &Error{Line: k.Line, Field: field, Problem: "unknown field" + suggest(k.Value, limitFields) + " (known: " + strings.Join(limitFields, ", ") + ")"}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func decodeNumber[T int | int64 | float64](v *yaml.Node, field string, out *T) error {
	if v.Kind != yaml.ScalarNode || (v.Tag != "!!int" && v.Tag != "!!float") {
		return typeError(v, field, "a number")
	}
	var n T
	if err := v.Decode(&n); err != nil {
		return typeError(v, field, "a number")
	}
	if n < 0 {
		return &Error{Line: v.Line, Field: field, Problem: "must not be negative"}
	}
	*out = n
	return nil
}

// check validates values that decode but make no sense.
func (f *File) check() error {
	line := func(k string) int { return f.Lines[k] }
	switch f.SetupUser {
	case "", "root", "wrench":
	default:
		return &Error{Line: line("setup_user"), Field: "setup_user", Problem: fmt.Sprintf("%q: want root or wrench (the sandbox user)", f.SetupUser)}
	}
	for k := range f.Env {
		if !validEnvName(k) {
			return &Error{Line: line("env"), Field: "env." + k, Problem: "is not a valid environment variable name"}
		}
		if reservedEnv(k) {
			return &Error{Line: line("env"), Field: "env." + k, Problem: "is set by Wrench and cannot be overridden"}
		}
	}
	for _, list := range []struct {
		field string
		hosts []string
	}{{"egress", f.Egress}, {"agent_egress", f.AgentEgress}} {
		for i, h := range list.hosts {
			if err := CheckHostPattern(h); err != nil {
				return &Error{Line: line(list.field), Field: fmt.Sprintf("%s[%d]", list.field, i), Problem: err.Error()}
			}
		}
	}
	for i, p := range f.Image.Packages {
		if !debianPackage(p) {
			return &Error{Line: line("image"), Field: fmt.Sprintf("image.packages[%d]", i), Problem: fmt.Sprintf("%q is not a Debian package name", p)}
		}
	}
	for _, list := range []struct {
		field string
		paths []string
	}{{"instructions", f.Instructions}, {"manifests", f.Manifests}} {
		for i, p := range list.paths {
			if !relativePath(p) {
				return &Error{Line: line(list.field), Field: fmt.Sprintf("%s[%d]", list.field, i), Problem: fmt.Sprintf("%q must be a relative path inside the repository", p)}
			}
			if _, err := path.Match(p, ""); err != nil {
				return &Error{Line: line(list.field), Field: fmt.Sprintf("%s[%d]", list.field, i), Problem: fmt.Sprintf("%q is not a valid pattern", p)}
			}
		}
	}
	for i, c := range f.Setup {
		if strings.TrimSpace(c) == "" {
			return &Error{Line: line("setup"), Field: fmt.Sprintf("setup[%d]", i), Problem: "is empty"}
		}
	}
	return nil
}

// EnvNames returns the names of Env, sorted.
func (f *File) EnvNames() []string {
	names := make([]string, 0, len(f.Env))
	for k := range f.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func validEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i, r := range k {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// reservedEnv are variables Wrench sets in every sandbox.
func reservedEnv(k string) bool {
	switch strings.ToUpper(k) {
	case "HOME", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY":
		return true
	}
	return false
}

func debianPackage(p string) bool {
	if len(p) < 2 || len(p) > 100 {
		return false
	}
	for i, r := range p {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case (r == '+' || r == '-' || r == '.') && i > 0:
		case r == ':' || r == '=' || r == '~' || (r >= 'A' && r <= 'Z'):
			// architecture qualifiers and version pins: name:arch, name=version
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func relativePath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\x00") {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return false
		}
	}
	return true
}

// CheckHostPattern checks an egress host pattern: a host name, optionally
// with a port ("example.com:8443"), or "*." followed by a domain.
func CheckHostPattern(h string) error {
	if h == "" || strings.ContainsAny(h, "/ @\\") {
		return fmt.Errorf("%q is not a host name or *.domain pattern", h)
	}
	host := h
	if i := strings.LastIndex(h, ":"); i > 0 {
		host = h[:i]
		port := h[i+1:]
		if port == "" || len(port) > 5 || strings.Trim(port, "0123456789") != "" {
			return fmt.Errorf("%q: bad port", h)
		}
	}
	host = strings.TrimPrefix(host, "*.")
	if host == "" || strings.ContainsAny(host, "*/ @") || strings.HasPrefix(host, ".") || strings.HasSuffix(host, ".") {
		return fmt.Errorf("%q is not a host name or *.domain pattern", h)
	}
	return nil
}
