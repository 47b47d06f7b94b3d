package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/wrenchworks/wrench/sandbox/image"
)

// cmdImage builds the default sandbox image from Debian packages:
// `wrench image build [--tag T] [--force] [--verbose]`. A second call is
// instant unless --force or the recipe changed.
func cmdImage(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 || args[0] != "build" {
		fmt.Fprintln(env.stderr, "usage: wrench image build [--tag wrench-sandbox:default] [--force] [--verbose]")
		return exitBadInput
	}
	fs := flag.NewFlagSet("wrench image build", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	tag := fs.String("tag", defaultImage, "image tag")
	force := fs.Bool("force", false, "rebuild even when the image is current")
	verbose := fs.Bool("verbose", false, "show the package installer's output")
	mirror := fs.String("mirror", "", "Debian mirror (default deb.debian.org)")
	if err := fs.Parse(args[1:]); err != nil {
		return exitBadInput
	}
	var progress io.Writer
	if *verbose {
		progress = env.stderr
	}
	start := time.Now()
	err := image.Build(ctx, image.Options{
		Tag:      *tag,
		Force:    *force,
		Mirror:   *mirror,
		Progress: progress,
		Logger:   slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench image build: %v\n", err)
		return exitInfra
	}
	fmt.Fprintf(env.stderr, "image %s ready (%s)\n", *tag, time.Since(start).Round(100*time.Millisecond))
	return exitOK
}
