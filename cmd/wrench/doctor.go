package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/docker/docker/client"

	"github.com/wrenchworks/wrench/sandbox/doctor"
)

// cmdDoctor reports what the Docker engine supports and exits non-zero,
// naming the problem and its fix, when something the configuration needs
// is missing: `wrench doctor [--image T] [--runtime R] [--json]`.
func cmdDoctor(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("wrench doctor", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	img := fs.String("image", defaultImage, "sandbox image tasks will use")
	runtime := fs.String("runtime", env.getenv("WRENCH_RUNTIME"), "OCI runtime sandboxes will use, e.g. runsc (default: the engine's)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		return exitBadInput
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "wrench doctor: unexpected argument %q\n", fs.Arg(0))
		return exitBadInput
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench doctor: docker client: %v\n", err)
		return exitInfra
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r := doctor.Check(ctx, cli, doctor.Options{Image: *img, Runtime: *runtime})
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			fmt.Fprintf(env.stderr, "wrench doctor: %v\n", err)
			return exitInfra
		}
	} else if err := r.WriteText(env.stdout); err != nil {
		fmt.Fprintf(env.stderr, "wrench doctor: %v\n", err)
		return exitInfra
	}
	if !r.OK() {
		return exitInfra
	}
	return exitOK
}
