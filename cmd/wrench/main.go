// Command wrench turns tickets into verified patches: it runs one task
// (`wrench run`), serves the task queue and API (`wrench serve`), joins a
// cluster as a worker (`wrench worker`), and talks to a server (`submit`,
// `status`, `watch`, `result`, `cancel`, `resume`, `list`).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// Exit codes shared by every subcommand.
const (
	exitOK         = 0
	exitUnresolved = 1
	exitBadInput   = 2
	exitInfra      = 3
)

// command is one subcommand: it parses its own flags from args and returns
// the process exit code.
type command struct {
	summary string
	hidden  bool
	run     func(ctx context.Context, env *cliEnv, args []string) int
}

// cliEnv is what a subcommand may touch of the process.
type cliEnv struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// sawFlags, when set, is shown every command's flag set before it is
	// parsed (the reference docs' tests read names and defaults from it).
	sawFlags func(*flag.FlagSet)
}

func commands() map[string]command {
	return map[string]command{
		"run":         {summary: "run one task end to end and print its patch", run: cmdRun},
		"image":       {summary: "build the default sandbox image (image build)", run: cmdImage},
		"model":       {summary: "serve the scripted model (model scripted --script FILE)", run: cmdModel},
		"doctor":      {summary: "check the Docker engine, the sandbox image and the model endpoint and key", run: cmdDoctor},
		"replay":      {summary: "re-run a trajectory's tool calls in a fresh sandbox", run: cmdReplay},
		"env":         {summary: "list, build ahead of tasks, and prune environment snapshots (env ls|build|prune)", run: cmdEnv},
		"config":      {summary: "show the configuration a task would run with and where each value comes from (config check)", run: cmdConfig},
		"bench":       {summary: "mine a benchmark from history, run it, compare runs (bench mine|run|compare)", run: cmdBench},
		"serve":       {summary: "run NATS, dispatcher, workers and the HTTP API in one process", run: cmdServe},
		"worker":      {summary: "join an external NATS as a worker", run: cmdWorker},
		"submit":      {summary: "submit a task to a server", run: cmdSubmit},
		"status":      {summary: "show a task's state", run: cmdStatus},
		"watch":       {summary: "stream a task's events", run: cmdWatch},
		"result":      {summary: "show a task's result (and write its patch)", run: cmdResult},
		"cancel":      {summary: "cancel a task", run: cmdCancel},
		"resume":      {summary: "resume a paused task from where it paused", run: cmdResume},
		"list":        {summary: "list tasks", run: cmdList},
		"__shim":      {summary: "in-sandbox helper", hidden: true, run: cmdShim},
		"nats-server": {summary: "run the NATS server wrench embeds as a process (a cluster node)", hidden: true, run: cmdNATSServer},
		"version":     {summary: "print the version", run: cmdVersion},
		"completion":  {summary: "print a shell completion script (completion bash|zsh)", run: cmdCompletion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, &cliEnv{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}, os.Args[1:])
	stop()
	os.Exit(code)
}

func dispatch(ctx context.Context, env *cliEnv, args []string) int {
	cmds := commands()
	switch {
	case len(args) == 0:
		usage(env.stderr, cmds)
		return exitBadInput
	case args[0] == "--version" || args[0] == "-version":
		return cmdVersion(ctx, env, nil)
	case args[0] == "help" && len(args) > 1:
		// `wrench help run` is `wrench run -h`.
		c, ok := cmds[args[1]]
		if !ok {
			fmt.Fprintf(env.stderr, "wrench: unknown command %q\n\n", args[1])
			usage(env.stderr, cmds)
			return exitBadInput
		}
		return c.run(ctx, env, append(args[2:], "-h"))
	case isHelp(args[0]):
		usage(env.stdout, cmds)
		return exitOK
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(env.stderr, "wrench: unknown command %q\n\n", args[0])
		usage(env.stderr, cmds)
		return exitBadInput
	}
	return c.run(ctx, env, args[1:])
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: wrench <command> [flags] [arguments]\n       wrench --version\n\ncommands:")
	names := make([]string, 0, len(cmds))
	for n, c := range cmds {
		if !c.hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'wrench <command> -h' (or 'wrench help <command>') for a command's arguments and flags.")
}

func cmdVersion(_ context.Context, env *cliEnv, args []string) int {
	pos, code, ok := parseCommand(env, flag.NewFlagSet("wrench version", flag.ContinueOnError), args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(env.stderr, "wrench version: unexpected argument %q\n", pos[0])
		return exitBadInput
	}
	fmt.Fprintln(env.stdout, "wrench", buildVersion())
	return exitOK
}
