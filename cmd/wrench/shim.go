package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/wrenchworks/wrench/sandbox/shim"
)

// cmdShim is the in-sandbox helper: the Docker backend starts the wrench
// binary as the container's main process with `__shim`, and talks to it
// over the container's stdin and stdout (see package shim). It is not meant
// to be run by hand.
func cmdShim(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("__shim", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	workdir := fs.String("workdir", "/workspace", "workspace root")
	egressSocket := fs.String("egress-socket", "", "unix socket of the egress proxy (with -egress-listen)")
	egressListen := fs.String("egress-listen", "", "loopback address to forward to -egress-socket, e.g. 127.0.0.1:3128")
	maxFile := fs.Int64("max-file-size", 0, "largest file any command may write, in bytes (RLIMIT_FSIZE; 0: no limit)")
	if err := fs.Parse(args); err != nil {
		return exitBadInput
	}
	if (*egressSocket == "") != (*egressListen == "") {
		fmt.Fprintln(env.stderr, "wrench __shim: -egress-socket and -egress-listen go together")
		return exitBadInput
	}
	if err := shim.LimitFileSize(*maxFile); err != nil {
		fmt.Fprintf(env.stderr, "wrench __shim: %v\n", err)
		return exitInfra
	}
	if err := shim.Harden(); err != nil {
		fmt.Fprintf(env.stderr, "wrench __shim: %v\n", err)
		return exitInfra
	}
	// The environment is the container's own (set by the backend and the
	// image), never the host's: it is the base of every command's.
	err := shim.Serve(ctx, env.stdin, env.stdout, shim.Options{
		WorkDir: *workdir, Env: os.Environ(),
		EgressSocket: *egressSocket, EgressListen: *egressListen,
	})
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench __shim: %v\n", err)
		return exitInfra
	}
	return exitOK
}
