package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// commandHelp is what `wrench <command> -h` shows besides the flags.
type commandHelp struct {
	// args is the synopsis after the command's name.
	args string
	// about says what the command does, in a few lines.
	about string
}

// commandHelps is the help of every command, keyed by its flag set's name
// ("wrench run", "wrench image build"). A test checks that every visible
// command has one.
func commandHelps() map[string]commandHelp {
	return map[string]commandHelp{
		"wrench run": {"--repo PATH|URL --task TEXT|@FILE [--test CMD] [flags]",
			"Run one task end to end: clone the repository, start a sandbox, let the\n" +
				"agent work, verify with the test command, and print the patch on stdout\n" +
				"(or write it to --out). Progress goes to stderr.\n" +
				"Exit codes: 0 resolved, 1 unresolved, 2 bad input, 3 infrastructure failure."},
		"wrench serve": {"[flags]",
			"Run NATS (embedded, unless --nats), the dispatcher, workers and the HTTP\n" +
				"API in one process. The API listens on --http; beyond loopback it\n" +
				"requires --token. See docs/operations.md."},
		"wrench worker": {"--nats URL [flags]",
			"Join an external NATS (or `wrench serve --nats-listen`) as a worker: take\n" +
				"tasks from the queue and run them."},
		"wrench submit": {"--repo URL|PATH --task TEXT|@FILE [flags] | --file TASK.json [flags]",
			"Submit a task to a server and print its id; --wait waits for the result,\n" +
				"--follow streams its progress too."},
		"wrench status": {"[flags] ID", "Show a task's state."},
		"wrench watch": {"[flags] ID",
			"Stream a task's events on stdout until it is final."},
		"wrench result": {"[flags] ID",
			"Show a task's result: the patch on stdout (or --patch FILE), the result\n" +
				"object with --json. --trajectory FILE and --log FILE download the run's\n" +
				"trajectory (for wrench replay) and log."},
		"wrench cancel": {"[flags] ID", "Cancel a queued, paused or running task."},
		"wrench resume": {"[flags] ID",
			"Queue a paused task again (paused: its next model call would have crossed\n" +
				"a daily budget). Its next attempt continues from where it paused. Serve\n" +
				"resumes paused tasks by itself once their budget has room."},
		"wrench list": {"[flags]", "List tasks, newest first, a page at a time."},
		"wrench completion": {"bash|zsh",
			"Print a completion script for bash or zsh: commands, subcommands and\n" +
				"every command's flags. bash: source <(wrench completion bash);\n" +
				"zsh: source <(wrench completion zsh)."},
		"wrench image build": {"[flags]",
			"Build the default sandbox image from Debian packages (no registry needed).\n" +
				"A second call is instant unless --force or the recipe changed."},
		"wrench model scripted": {"--script FILE [--addr HOST:PORT]",
			"Serve the scripted model on its own: an OpenAI-compatible endpoint that\n" +
				"plays a script (one assistant reply per step), for demos and tests.\n" +
				"The script format, with every step kind, fault injection and\n" +
				"expect_observation: docs/scripted-model.md.\n" +
				"`wrench run --model scripted:FILE` serves a script for one run by itself."},
		"wrench doctor": {"[flags]",
			"Check what Wrench needs: the Docker engine and what it supports, the\n" +
				"sandbox image, the model endpoint and key, and (with flags) NATS and GitHub."},
		"wrench replay": {"TRAJECTORY.jsonl --repo PATH|URL [--ref REF] [--commit SHA] [flags]",
			"Re-run a trajectory's tool calls in a fresh sandbox on the same repository\n" +
				"and report where the observations diverge. Exit 0 when every observation\n" +
				"matched, 1 at the first divergence."},
		"wrench version": {"", "Print the version."},
		"wrench config check": {"[--repo PATH] [--policy FILE] [--task FILE] [--json]",
			"Show the configuration a task would run with (repository .wrench.yaml,\n" +
				"server policy, task) and where each value comes from."},
		"wrench env ls": {"[--json]", "List the environment snapshots in the data dir."},
		"wrench env build": {"--repo URL|PATH [--ref R] [--commit C] [flags]",
			"Build a repository's environment snapshot ahead of its tasks."},
		"wrench env prune": {"[--older-than DURATION] [--max-size SIZE] [flags]",
			"Remove environment snapshots by age or total size."},
		"wrench bench mine": {"--repo PATH|URL --out FILE [flags]",
			"Find benchmark instances in a repository's history and validate them\n" +
				"(docs/bench.md)."},
		"wrench bench run": {"--instances FILE --out DIR --model NAME [flags]",
			"Run benchmark instances through the queue and workers, grade and report\n" +
				"(docs/bench.md)."},
		"wrench bench compare": {"[--json] A B",
			"Compare two benchmark runs instance by instance (run directories or\n" +
				"results.jsonl files)."},
	}
}

// parseCommand parses a command's flags, which may come before, between
// or after its positional arguments, and returns the positionals. On -h
// it prints the command's help on stdout and returns exitOK; on a bad
// flag, the error and the synopsis on stderr and exitBadInput. ok is
// false in both cases: the command stops with code.
func parseCommand(env *cliEnv, fs *flag.FlagSet, args []string) (pos []string, code int, ok bool) {
	fs.SetOutput(env.stderr)
	fs.Usage = func() {} // printed below, to the right stream
	if env.sawFlags != nil {
		env.sawFlags(fs)
	}
	for {
		err := fs.Parse(args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			printHelp(env.stdout, fs, env.getenv)
			return nil, exitOK, false
		case err != nil:
			fmt.Fprintf(env.stderr, "usage: %s\nRun '%s -h' for help.\n", synopsis(fs.Name()), fs.Name())
			return nil, exitBadInput, false
		case fs.NArg() == 0:
			return pos, exitOK, true
		case fs.Arg(0) == "--":
			return append(pos, fs.Args()[1:]...), exitOK, true
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// synopsis is a command's one-line usage.
func synopsis(name string) string {
	if h, ok := commandHelps()[name]; ok && h.args != "" {
		return name + " " + h.args
	}
	return name
}

// printHelp writes a command's synopsis, description and flags. getenv
// tells which defaults came from the environment: those are not shown, so
// help never prints a token.
func printHelp(w io.Writer, fs *flag.FlagSet, getenv func(string) string) {
	fmt.Fprintf(w, "usage: %s\n", synopsis(fs.Name()))
	if h, ok := commandHelps()[fs.Name()]; ok && h.about != "" {
		fmt.Fprintf(w, "\n%s\n", h.about)
	}
	var lines []string
	fs.VisitAll(func(f *flag.Flag) { lines = append(lines, flagHelp(f, getenv)) })
	if len(lines) > 0 {
		fmt.Fprintf(w, "\nflags:\n%s", strings.Join(lines, ""))
	}
}

// placeholder is a backquoted word of a usage string that names the
// flag's value (FILE, URL, HOST:PORT); other backquoted text is shown as
// written.
var placeholder = regexp.MustCompile("^[A-Z][A-Z0-9_:|.-]*$")

// flagHelp renders one flag as "  --name VALUE\n      usage (default …)\n".
func flagHelp(f *flag.Flag, getenv func(string) string) string {
	name, usage := valueName(f)
	var b strings.Builder
	fmt.Fprintf(&b, "  --%s", f.Name)
	if name != "" {
		b.WriteString(" " + name)
	}
	fmt.Fprintf(&b, "\n      %s", usage)
	if showDefault(f, usage, getenv) {
		fmt.Fprintf(&b, " (default %s)", f.DefValue)
	}
	b.WriteString("\n")
	return b.String()
}

// valueName returns the name shown for a flag's value ("" for booleans)
// and its usage with backquotes removed.
func valueName(f *flag.Flag) (string, string) {
	usage := f.Usage
	var name string
	if i := strings.IndexByte(usage, '`'); i >= 0 {
		if j := strings.IndexByte(usage[i+1:], '`'); j >= 0 {
			if word := usage[i+1 : i+1+j]; placeholder.MatchString(word) {
				name = word
			}
		}
	}
	usage = strings.ReplaceAll(usage, "`", "")
	if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
		return "", usage
	}
	if name != "" {
		return name, usage
	}
	switch fmt.Sprintf("%T", f.Value) {
	case "*flag.stringValue":
		return "string", usage
	case "*flag.durationValue":
		return "duration", usage
	case "*flag.intValue", "*flag.int64Value", "*flag.uintValue", "*flag.uint64Value":
		return "int", usage
	case "*flag.float64Value":
		return "float", usage
	}
	return "value", usage
}

// envRef matches the $NAME of an environment variable in a usage string.
var envRef = regexp.MustCompile(`\$([A-Z][A-Z0-9_]*)`)

// showDefault says whether to append the default: not when it is the zero
// value, when the usage already says it ("default X", "else X"), or when
// it came from an environment variable the usage names (it may be a
// secret).
func showDefault(f *flag.Flag, usage string, getenv func(string) string) bool {
	switch f.DefValue {
	case "", "0", "false", "0s":
		return false
	}
	if strings.Contains(usage, "default "+f.DefValue) || strings.Contains(usage, "else "+f.DefValue) {
		return false
	}
	for _, m := range envRef.FindAllStringSubmatch(usage, -1) {
		if getenv(m[1]) == f.DefValue {
			return false
		}
	}
	return true
}

// isHelp says whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// subcommand checks that args start with sub, the one subcommand of a
// command group (`wrench model scripted`). Help, nothing or anything else
// prints the group's usage; ok is false and the command exits with code.
func subcommand(env *cliEnv, group, sub string, args []string) (code int, ok bool) {
	if len(args) > 0 && args[0] == sub {
		return exitOK, true
	}
	full := group + " " + sub
	w, code := env.stderr, exitBadInput
	switch {
	case len(args) > 0 && isHelp(args[0]):
		w, code = env.stdout, exitOK
	case len(args) > 0:
		fmt.Fprintf(env.stderr, "%s: unknown subcommand %q\n", group, args[0])
	}
	fmt.Fprintf(w, "usage: %s\n", synopsis(full))
	if h := commandHelps()[full]; h.about != "" {
		fmt.Fprintf(w, "\n%s\n", h.about)
	}
	fmt.Fprintf(w, "\nRun '%s -h' for its flags.\n", full)
	return code, false
}
