package image

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker"
)

// DefaultTag is the tag of the default sandbox image.
const DefaultTag = sandbox.DefaultImage

// Labels on the images Build produces.
const (
	// LabelImage marks an image built by this package; its value is "sandbox".
	LabelImage = "dev.wrench.image"
	// LabelRecipe holds the hash of the recipe the image was built from.
	LabelRecipe = "dev.wrench.image.recipe"
)

// GoCacheSeed is where the image keeps its pre-built, read-only Go build
// cache.
const GoCacheSeed = "/opt/wrench/gocache"

// Inspector looks images up.
type Inspector interface {
	// InspectImage describes a local image; ok is false when there is no
	// image of that name.
	InspectImage(ctx context.Context, ref string) (img sandbox.Image, ok bool, err error)
}

// Engine is what Build asks of the engine.
type Engine interface {
	Inspector
	// ImportImage makes an image named ref from a root file system's tar
	// stream, with changes (Dockerfile instructions) applied and comment
	// as its history; a stream that fails tags nothing.
	ImportImage(ctx context.Context, rootfs io.Reader, ref string, changes []string, comment string) error
	// RemoveImageIfUnused deletes an image unless a container was made
	// from it.
	RemoveImageIfUnused(ctx context.Context, ref string) error
}

var _ Engine = (*docker.Engine)(nil)

// Options configure Build. The zero value builds [DefaultTag] through the
// engine named by the DOCKER_* environment variables.
type Options struct {
	// Tag names the image; empty means DefaultTag.
	Tag string
	// Force rebuilds even when an image with the current recipe exists.
	Force bool
	// Logger receives one line per step; nil discards.
	Logger *slog.Logger
	// Progress receives mmdebstrap's output as it runs; nil discards.
	Progress io.Writer
	// Engine is the Docker engine to import into; nil connects to the one
	// named by the environment ([docker.FromEnv]).
	Engine Engine
	// Mirror is the Debian mirror; empty means DefaultMirror.
	Mirror string
	// CacheDir keeps downloaded packages between builds so a rebuild does
	// not fetch them again; empty means <user cache dir>/wrench/debs.
	CacheDir string
	// NoCache disables CacheDir.
	NoCache bool
	// Packages are extra Debian packages installed on top of the default
	// recipe's (a team's own base image; give it its own Tag).
	Packages []string
}

// Status describes the image a tag names.
type Status struct {
	Tag string `json:"tag"`
	// Present is whether the tag exists in the engine.
	Present bool `json:"present"`
	// Current is whether it was built from this package's default recipe.
	Current bool `json:"current"`
	// Recipe is the hash of the recipe it was built from.
	Recipe string `json:"recipe,omitempty"`
	ID     string `json:"id,omitempty"`
	Size   int64  `json:"size,omitempty"`
}

// Build builds the sandbox image and tags it, unless an image with the same
// tag and recipe already exists and opts.Force is false. It returns a
// *sandbox.Error of kind ErrUnavailable when the engine cannot be reached.
// A failed build leaves the previous image, if any, untouched.
func Build(ctx context.Context, opts Options) error {
	if opts.Tag == "" {
		opts.Tag = DefaultTag
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	eng := opts.Engine
	if eng == nil {
		e, err := docker.FromEnv()
		if err != nil {
			return err
		}
		defer e.Close()
		eng = e
	}
	r := defaultRecipe(opts.Mirror, opts.Packages)
	hash := r.hash()

	st, err := Inspect(ctx, eng, opts.Tag)
	if err != nil {
		return err
	}
	st.Current = st.Recipe == hash
	switch {
	case st.Present && st.Current && !opts.Force:
		log.Info("sandbox image up to date", "tag", opts.Tag, "id", docker.ShortImageID(st.ID))
		return nil
	case st.Present && !st.Current:
		log.Info("sandbox image recipe changed; rebuilding", "tag", opts.Tag)
	}

	start := time.Now()
	log.Info("building sandbox image", "tag", opts.Tag, "suite", r.Suite, "mirror", r.Mirror)
	if err := r.run(ctx, eng, opts, hash, log); err != nil {
		return fmt.Errorf("build image %s: %w", opts.Tag, err)
	}
	built, err := Inspect(ctx, eng, opts.Tag)
	if err != nil {
		return err
	}
	if !built.Current {
		return fmt.Errorf("build image %s: imported image lacks recipe label %s", opts.Tag, LabelRecipe)
	}
	log.Info("built sandbox image", "tag", opts.Tag, "id", docker.ShortImageID(built.ID),
		"size_mb", built.Size>>20, "duration", time.Since(start).Round(100*time.Millisecond))
	if st.Present && st.ID != built.ID {
		// The old image is now untagged; drop it unless a container uses it.
		if err := eng.RemoveImageIfUnused(ctx, st.ID); err != nil {
			log.Info("previous sandbox image kept", "id", docker.ShortImageID(st.ID), "reason", err.Error())
		}
	}
	return nil
}

// Exists reports whether an image tagged tag exists in the engine named by
// the environment (built from any recipe). It returns a *sandbox.Error of
// kind ErrUnavailable when the engine cannot be reached.
func Exists(ctx context.Context, tag string) (bool, error) {
	e, err := docker.FromEnv()
	if err != nil {
		return false, err
	}
	defer e.Close()
	st, err := Inspect(ctx, e, tag)
	return st.Present, err
}

// Inspect looks tag up in eng. A missing image is not an error: Present is
// false. It returns a *sandbox.Error of kind ErrUnavailable when the
// engine cannot be reached.
func Inspect(ctx context.Context, eng Inspector, tag string) (Status, error) {
	st := Status{Tag: tag}
	img, ok, err := eng.InspectImage(ctx, tag)
	if err != nil {
		return st, &sandbox.Error{Kind: sandbox.ErrUnavailable, Op: "inspect image " + tag, Err: err}
	}
	if !ok {
		return st, nil
	}
	st.Present = true
	st.ID = img.ID
	st.Size = img.Size
	st.Recipe = img.Labels[LabelRecipe]
	st.Current = st.Recipe == RecipeHash()
	return st, nil
}

// RecipeHash is the hash of the recipe Build uses, the value of
// [LabelRecipe] on an image it builds.
func RecipeHash() string { return defaultRecipe("", nil).hash() }
