package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/wrenchworks/wrench/llm/scripted"
)

// cmdModel serves the scripted model on its own: `wrench model scripted
// --script FILE --addr HOST:PORT`. Any OpenAI-compatible client can talk to
// it, which makes it a stand-in for a real endpoint in demos and tests.
func cmdModel(ctx context.Context, env *cliEnv, args []string) int {
	if code, ok := subcommand(env, "wrench model", "scripted", args); !ok {
		return code
	}
	fs := flag.NewFlagSet("wrench model scripted", flag.ContinueOnError)
	script := fs.String("script", "", "script `FILE` (YAML) to play (required; format: docs/scripted-model.md)")
	addr := fs.String("addr", "127.0.0.1:8089", "`HOST:PORT` to listen on (port 0: a free one)")
	pos, code, ok := parseCommand(env, fs, args[1:])
	if !ok {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(env.stderr, "wrench model scripted: unexpected argument %q\n", pos[0])
		return exitBadInput
	}
	if *script == "" {
		fmt.Fprintln(env.stderr, "wrench model scripted: --script is required")
		return exitBadInput
	}
	err := scripted.ServeFile(ctx, *script, *addr, func(url string) {
		fmt.Fprintf(env.stdout, "scripted model serving %s at %s (Ctrl-C to stop)\n", *script, url)
	})
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench model scripted: %v\n", err)
		return exitBadInput
	}
	return exitOK
}
