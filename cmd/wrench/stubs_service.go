package main

import (
	"context"
	"fmt"
)

// Placeholders for the service commands; the service work replaces this file.

func notYet(name string) func(context.Context, *cliEnv, []string) int {
	return func(_ context.Context, env *cliEnv, _ []string) int {
		fmt.Fprintf(env.stderr, "wrench %s: not available in this build yet\n", name)
		return exitBadInput
	}
}

var (
	cmdServe  = notYet("serve")
	cmdWorker = notYet("worker")
	cmdSubmit = notYet("submit")
	cmdStatus = notYet("status")
	cmdWatch  = notYet("watch")
	cmdResult = notYet("result")
	cmdCancel = notYet("cancel")
	cmdList   = notYet("list")
)
