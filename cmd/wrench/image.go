package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/sandbox/image"
)

// cmdImage builds the default sandbox image from Debian packages:
// `wrench image build [--tag T] [--force] [--verbose]`. A second call is
// instant unless --force or the recipe changed.
func cmdImage(ctx context.Context, env *cliEnv, args []string) int {
	if code, ok := subcommand(env, "wrench image", "build", args); !ok {
		return code
	}
	fs := flag.NewFlagSet("wrench image build", flag.ContinueOnError)
	tag := fs.String("tag", defaultImage, "image tag")
	force := fs.Bool("force", false, "rebuild even when the image is current")
	verbose := fs.Bool("verbose", false, "show the package installer's output")
	mirror := fs.String("mirror", "", "Debian mirror (default deb.debian.org)")
	var packages stringList
	fs.Var(&packages, "package", "extra Debian package to install (repeatable; give the image its own --tag)")
	pos, code, ok := parseCommand(env, fs, args[1:])
	if !ok {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(env.stderr, "wrench image build: unexpected argument %q\n", pos[0])
		return exitBadInput
	}
	// Without --verbose, a status line: the installer's steps ("I: …"
	// lines) and the build's own, redrawn in place on a terminal.
	progress, logOut := io.Writer(env.stderr), io.Writer(env.stderr)
	if !*verbose {
		sl := newStatusLine(env.stderr, isTerminal(env.stderr, env), "image "+*tag)
		defer sl.Close()
		lw := newLineWriter(func(line string) { imageLine(sl, line) })
		progress, logOut = lw, lw
	}
	start := time.Now()
	err := image.Build(ctx, image.Options{
		Tag:      *tag,
		Force:    *force,
		Mirror:   *mirror,
		Packages: packages,
		Progress: progress,
		Logger:   slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench image build: %v\n", err)
		return exitInfra
	}
	fmt.Fprintf(env.stderr, "image %s ready (%s)\n", *tag, time.Since(start).Round(100*time.Millisecond))
	return exitOK
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// imageLine turns one line of an image build's output into the status
// line: mmdebstrap's "I: step..." and the build's own log messages are
// steps; warnings and errors stay on screen; apt's chatter is dropped (a
// failure quotes its tail in the error).
func imageLine(sl *statusLine, line string) {
	switch {
	case strings.HasPrefix(line, "I: "):
		sl.Step(strings.TrimRight(strings.TrimPrefix(line, "I: "), ".…"))
	case strings.HasPrefix(line, "W: "), strings.HasPrefix(line, "E: "):
		sl.Print(line)
	case strings.Contains(line, "level=WARN"), strings.Contains(line, "level=ERROR"):
		sl.Print(line)
	case strings.Contains(line, " msg="):
		rest := line[strings.Index(line, " msg=")+len(" msg="):]
		if q, err := strconv.QuotedPrefix(rest); err == nil {
			rest, _ = strconv.Unquote(q)
		} else {
			rest, _, _ = strings.Cut(rest, " ")
		}
		sl.Step(rest)
	}
}
