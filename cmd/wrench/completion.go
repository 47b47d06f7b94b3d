package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// subcommands are the commands made of subcommands, with theirs.
func subcommands() map[string][]string {
	return map[string][]string{"image": {"build"}, "model": {"scripted"}, "bench": {"mine", "run", "compare"},
		"env": {"ls", "build", "prune"}, "config": {"check"}}
}

// cmdCompletion prints a shell completion script: commands, subcommands
// and every command's flags, as `-h` shows them.
func cmdCompletion(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("wrench completion", flag.ContinueOnError)
	pos, code, ok := parseCommand(env, fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 || (pos[0] != "bash" && pos[0] != "zsh") {
		fmt.Fprintf(env.stderr, "usage: %s\n", synopsis(fs.Name()))
		return exitBadInput
	}
	if pos[0] == "zsh" {
		fmt.Fprintln(env.stdout, "autoload -U +X bashcompinit && bashcompinit")
	}
	writeBashCompletion(env.stdout, completionFlags(ctx))
	return exitOK
}

// completionFlags asks every visible command and subcommand for its help,
// with nothing from the environment, and returns its flags keyed by the
// words after `wrench` ("run", "bench mine").
func completionFlags(ctx context.Context) map[string][]string {
	out := map[string][]string{}
	for name, c := range commands() {
		if c.hidden {
			continue
		}
		calls := [][]string{{name, "-h"}}
		for _, sub := range subcommands()[name] {
			calls = append(calls, []string{name, sub, "-h"})
		}
		for _, call := range calls {
			env := &cliEnv{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard,
				getenv: func(string) string { return "" },
				sawFlags: func(fs *flag.FlagSet) {
					var names []string
					fs.VisitAll(func(f *flag.Flag) { names = append(names, "--"+f.Name) })
					sort.Strings(names)
					out[strings.TrimPrefix(fs.Name(), "wrench ")] = names
				}}
			dispatch(ctx, env, call)
		}
	}
	return out
}

// writeBashCompletion writes a bash function completing `wrench`: the
// command, then a subcommand, then flags (after a "-") or file names.
func writeBashCompletion(w io.Writer, flags map[string][]string) {
	var top []string
	for name, c := range commands() {
		if !c.hidden {
			top = append(top, name)
		}
	}
	sort.Strings(top)
	subs := subcommands()
	groups := make([]string, 0, len(subs))
	for g := range subs {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	keys := make([]string, 0, len(flags))
	for k := range flags {
		keys = append(keys, k)
	}
	sort.Strings(keys)

	fmt.Fprintf(w, `# wrench shell completion: source <(wrench completion bash)
_wrench() {
	local cur=${COMP_WORDS[COMP_CWORD]} key=${COMP_WORDS[1]} words=""
	if [[ $COMP_CWORD -eq 1 ]]; then
		COMPREPLY=($(compgen -W "%s help" -- "$cur"))
		return
	fi
	case $key in
`, strings.Join(top, " "))
	for _, g := range groups {
		fmt.Fprintf(w, "\t%s)\n\t\tif [[ $COMP_CWORD -eq 2 ]]; then\n\t\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n\t\t\treturn\n\t\tfi\n\t\tkey=\"$key ${COMP_WORDS[2]}\" ;;\n",
			g, strings.Join(subs[g], " "))
	}
	fmt.Fprint(w, "\thelp) words=\""+strings.Join(top, " ")+"\" ;;\n\tesac\n\tcase $key in\n")
	for _, k := range keys {
		fmt.Fprintf(w, "\t%q) words=%q ;;\n", k, strings.Join(flags[k], " "))
	}
	fmt.Fprint(w, `	esac
	if [[ $cur == -* || $key == help ]]; then
		COMPREPLY=($(compgen -W "$words" -- "$cur"))
	else
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}
complete -o default -F _wrench wrench
`)
}
