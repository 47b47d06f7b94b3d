package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCompletion: the bash script completes commands, subcommands and
// every flag each command takes, in a real bash; zsh gets the same
// through bashcompinit.
func TestCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	code, script, errOut := wrench(t, nil, "completion", "bash")
	if code != exitOK {
		t.Fatalf("wrench completion bash: exit %d: %s", code, errOut)
	}
	words := map[string][]string{} // `"run") words="--a --b" ;;` lines
	for _, l := range strings.Split(script, "\n") {
		if k, rest, ok := strings.Cut(strings.TrimSpace(l), `) words="`); ok {
			words[strings.Trim(k, `"`)] = strings.Fields(strings.TrimSuffix(rest, `" ;;`))
		}
	}
	for name, fs := range flagSets(t) {
		key := strings.TrimPrefix(name, "wrench ")
		fs.VisitAll(func(f *flag.Flag) {
			if !slices.Contains(words[key], "--"+f.Name) {
				t.Errorf("the script does not complete %s --%s (it offers %q)", key, f.Name, words[key])
			}
		})
	}
	path := filepath.Join(t.TempDir(), "wrench.bash")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		line string // the words typed, the last one being completed
		want string
	}{
		{"wrench ru", "run"},
		{"wrench run --re", "--ref --repo"},
		{"wrench bench ", "mine run compare"},
		{"wrench bench run --inst", "--instances"},
		{"wrench env pr", "prune"},
		{"wrench help wat", "watch"},
		{"wrench serve --nats-l", "--nats-listen"},
		{"wrench completion --h", ""},
	}
	for _, tt := range tests {
		words := strings.Split(tt.line, " ")
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		prog := "source " + path + "; COMP_WORDS=(" + strings.Join(quoted, " ") + "); COMP_CWORD=" + itoa(len(words)-1) +
			`; _wrench; echo "${COMPREPLY[*]}"`
		out, err := exec.Command(bash, "-c", prog).CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != tt.want {
			t.Errorf("%q completes to %q (%v), want %q", tt.line, got, err, tt.want)
		}
	}
	code, zsh, _ := wrench(t, nil, "completion", "zsh")
	if code != exitOK || !strings.HasPrefix(zsh, "autoload -U +X bashcompinit && bashcompinit\n") || !strings.HasSuffix(zsh, script) {
		t.Errorf("wrench completion zsh: exit %d, not bashcompinit and the bash script:\n%.200s", code, zsh)
	}
	if code, _, _ := wrench(t, nil, "completion", "fish"); code != exitBadInput {
		t.Errorf("wrench completion fish: exit %d, want %d", code, exitBadInput)
	}
}
