package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/wrenchworks/wrench/github"
	"github.com/wrenchworks/wrench/llm"
	"github.com/wrenchworks/wrench/sandbox/docker"
	"github.com/wrenchworks/wrench/sandbox/doctor"
)

// checkGitHubApp checks the GitHub App, when one is configured, and adds
// what it lacks to r's problems (check "github"); it returns a one-line
// summary ("" when no App is configured).
func checkGitHubApp(ctx context.Context, g githubFlags, r *doctor.Report, env *cliEnv) (string, error) {
	if g.appID == "" && g.appKey == "" {
		return "", nil
	}
	gc, err := g.open(serviceLogger(env, "error"))
	if err != nil {
		return "", err
	}
	c := github.CheckApp(ctx, gc.app)
	for _, p := range c.Problems {
		r.Problems = append(r.Problems, doctor.Finding{Check: "github", Message: p.Message, Fix: p.Fix})
	}
	return c.Summary(), nil
}

// addModelFindings puts what llm.Check found into the report (check
// "model").
func addModelFindings(r *doctor.Report, mr llm.CheckReport) {
	for _, f := range mr.Problems {
		r.Problems = append(r.Problems, doctor.Finding{Check: "model", Message: f.Message, Fix: f.Fix})
	}
	for _, f := range mr.Warnings {
		r.Warnings = append(r.Warnings, doctor.Finding{Check: "model", Message: f.Message, Fix: f.Fix})
	}
}

// cmdDoctor reports what the Docker engine supports and exits non-zero,
// naming the problem and its fix, when something the configuration needs
// is missing: `wrench doctor [--image T] [--runtime R] [--data-dir D] [--json]`.
func cmdDoctor(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("wrench doctor", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	img := fs.String("image", defaultImage, "sandbox image tasks will use")
	runtime := fs.String("runtime", env.getenv("WRENCH_RUNTIME"), "OCI runtime sandboxes will use, e.g. runsc (default $WRENCH_RUNTIME, else the engine's)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	dataDir := fs.String("data-dir", env.getenv("WRENCH_DATA_DIR"), "data dir of serve/worker: checks the engine sees it at the same path (default $WRENCH_DATA_DIR, else ~/.cache/wrench; not checked when it does not exist)")
	model := fs.String("model", "", "model whose endpoint and key to check (default $WRENCH_LLM_MODEL, else gpt-4.1; none skips the check)")
	var gh githubFlags
	gh.register(fs, env)
	var nf natsFlags
	nf.register(fs, "also check the queue on this NATS: that a task the API accepts survives an OS crash")
	pos, code, ok := parseCommand(env, fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(env.stderr, "wrench doctor: unexpected argument %q\n", pos[0])
		return exitBadInput
	}
	eng, err := docker.FromEnv()
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench doctor: %v\n", err)
		return exitInfra
	}
	defer eng.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	opts := doctor.Options{Image: *img, Runtime: *runtime}
	if dir, err := (commonFlags{dataDir: *dataDir}).resolvedDataDir(); err == nil {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			opts.BindSources = []string{dir}
		}
	}
	r := doctor.Check(ctx, eng, opts)
	if *model != "none" && *model != humanModel {
		mr := llm.Check(ctx, *model, llm.OpenConfig{Getenv: env.getenv})
		addModelFindings(&r, mr)
		if !*asJSON {
			fmt.Fprintf(env.stdout, "model: %s\n", mr.Summary())
		}
	}
	summary, err := checkGitHubApp(ctx, gh, &r, env)
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench doctor: %v\n", err)
		return exitBadInput
	}
	if summary != "" && !*asJSON {
		fmt.Fprintf(env.stdout, "github: %s\n", summary)
	}
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
	healthy := r.OK()
	if nf.url != "" && !doctorNATS(ctx, env.stdout, nf) {
		healthy = false
	}
	if !healthy {
		return exitInfra
	}
	return exitOK
}

// warnNoModelKey warns on stderr, at the start of a process that runs
// tasks, when the environment leaves the default model without a key.
func warnNoModelKey(env *cliEnv, cmd string) {
	if w := llm.KeyWarning(env.getenv); w != "" {
		fmt.Fprintf(env.stderr, "%s: warning: %s\n", cmd, w)
	}
}
