package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/wrenchworks/wrench/sandbox"
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

// Inspector is the part of the Docker client that looks images up.
type Inspector interface {
	ImageInspect(ctx context.Context, imageID string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
}

// Engine is the part of the Docker client that Build uses.
type Engine interface {
	Inspector
	ImageImport(ctx context.Context, source image.ImportSource, ref string, options image.ImportOptions) (io.ReadCloser, error)
	ImageRemove(ctx context.Context, imageID string, options image.RemoveOptions) ([]image.DeleteResponse, error)
}

var _ Engine = (*client.Client)(nil)

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
	// named by the environment, negotiating the API version.
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
		c, err := newClient()
		if err != nil {
			return err
		}
		defer c.Close()
		eng = c
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
		log.Info("sandbox image up to date", "tag", opts.Tag, "id", shortID(st.ID))
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
	log.Info("built sandbox image", "tag", opts.Tag, "id", shortID(built.ID),
		"size_mb", built.Size>>20, "duration", time.Since(start).Round(100*time.Millisecond))
	if st.Present && st.ID != built.ID {
		// The old image is now untagged; drop it unless a container uses it.
		if _, err := eng.ImageRemove(ctx, st.ID, image.RemoveOptions{PruneChildren: true}); err != nil {
			log.Info("previous sandbox image kept", "id", shortID(st.ID), "reason", err.Error())
		}
	}
	return nil
}

// Exists reports whether an image tagged tag exists in the engine named by
// the environment (built from any recipe). It returns a *sandbox.Error of
// kind ErrUnavailable when the engine cannot be reached.
func Exists(ctx context.Context, tag string) (bool, error) {
	c, err := newClient()
	if err != nil {
		return false, err
	}
	defer c.Close()
	st, err := Inspect(ctx, c, tag)
	return st.Present, err
}

// Inspect looks tag up in eng. A missing image is not an error: Present is
// false. It returns a *sandbox.Error of kind ErrUnavailable when the
// engine cannot be reached.
func Inspect(ctx context.Context, eng Inspector, tag string) (Status, error) {
	st := Status{Tag: tag}
	resp, err := eng.ImageInspect(ctx, tag)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return st, nil
		}
		return st, &sandbox.Error{Kind: sandbox.ErrUnavailable, Op: "inspect image " + tag, Err: err}
	}
	st.Present = true
	st.ID = resp.ID
	st.Size = resp.Size
	if resp.Config != nil {
		st.Recipe = resp.Config.Labels[LabelRecipe]
		st.Current = st.Recipe == RecipeHash()
	}
	return st, nil
}

// RecipeHash is the hash of the recipe Build uses, the value of
// [LabelRecipe] on an image it builds.
func RecipeHash() string { return defaultRecipe("", nil).hash() }

func newClient() (*client.Client, error) {
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, &sandbox.Error{Kind: sandbox.ErrUnavailable, Op: "connect to docker", Err: err}
	}
	return c, nil
}

// readImportStream drains the engine's JSON progress stream of an import
// and returns the first error message in it.
func readImportStream(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read import response: %w", err)
		}
		if msg.ErrorDetail.Message != "" {
			return errors.New(msg.ErrorDetail.Message)
		}
		if msg.Error != "" {
			return errors.New(msg.Error)
		}
	}
}

func shortID(id string) string {
	const prefix = "sha256:"
	if len(id) > len(prefix) && id[:len(prefix)] == prefix {
		id = id[len(prefix):]
	}
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}
