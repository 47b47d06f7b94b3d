package main

import (
	"context"
	"fmt"
)

// notYet is the placeholder of a command that has not landed yet.
func notYet(name string) func(context.Context, *cliEnv, []string) int {
	return func(_ context.Context, env *cliEnv, _ []string) int {
		fmt.Fprintf(env.stderr, "wrench %s: not available in this build yet\n", name)
		return exitBadInput
	}
}
