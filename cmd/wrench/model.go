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
	if len(args) == 0 || args[0] != "scripted" {
		fmt.Fprintln(env.stderr, "usage: wrench model scripted --script FILE [--addr HOST:PORT]")
		return exitBadInput
	}
	fs := flag.NewFlagSet("wrench model scripted", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	script := fs.String("script", "", "script file (YAML) to play (required)")
	addr := fs.String("addr", "127.0.0.1:8089", "address to listen on")
	if err := fs.Parse(args[1:]); err != nil {
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
