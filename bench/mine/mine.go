// Package mine finds benchmark instances in a repository's history: the
// commits that change both source and test files, split into the gold
// patch (source) and the test patch, with the commit message (or, given a
// GitHub token, the issue its pull request links) as problem statement.
// A Validator then keeps only those whose new tests fail without the
// source change and pass with it, in the repository's environment.
package mine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/wrenchworks/wrench/bench"
)

// Config says what to mine and how.
type Config struct {
	// Repo is a local path (working tree or bare repository) or an
	// https:// or file:// URL.
	Repo string
	// CloneURL is what instances record for workers to clone; empty means
	// Repo (made absolute when it is a path).
	CloneURL string
	// Name is "owner/repo", used in instance ids; empty means taken from
	// the origin remote when it is on GitHub, else the directory's name.
	Name string
	// Since skips commits authored before it.
	Since time.Time
	// Max stops after this many instances are kept (0: no cap).
	Max int
	// MaxPatchBytes and MaxFiles bound a candidate's change (defaults 200
	// KiB and 50 files).
	MaxPatchBytes int
	MaxFiles      int
	// Issues, when set, replaces a commit message by the issue its pull
	// request links.
	Issues IssueFinder
	// Validator, when set, runs each candidate's tests; nil keeps every
	// candidate, without test lists.
	Validator Validator
	// Concurrency is how many candidates are validated at once (default 1).
	Concurrency int
	// Progress, when set, hears of each candidate as it is settled, one at
	// a time.
	Progress func(Outcome)
	Logger   *slog.Logger
}

// Outcome is what became of one candidate.
type Outcome struct {
	Commit     string `json:"commit"`
	InstanceID string `json:"instance_id"`
	Kept       bool   `json:"kept"`
	Reason     string `json:"reason,omitempty"`
	Detail     string `json:"detail,omitempty"`
	// Seconds is how long validating it took.
	Seconds float64 `json:"seconds"`
}

// Report says what mining found, dropped and why, and how long it took.
type Report struct {
	Repo string `json:"repo"`
	// Commits are the commits walked; Skipped counts those that were no
	// candidate, by reason.
	Commits int            `json:"commits"`
	Skipped map[string]int `json:"skipped"`
	// Candidates are the commits that change source and tests; Outcomes
	// says what became of each one validated, in history order.
	Candidates int       `json:"candidates"`
	Kept       int       `json:"kept"`
	Dropped    int       `json:"dropped"`
	Outcomes   []Outcome `json:"outcomes"`
	// DropReasons counts Outcomes by reason.
	DropReasons     map[string]int `json:"drop_reasons"`
	WalkSeconds     float64        `json:"walk_seconds"`
	ValidateSeconds float64        `json:"validate_seconds"`
}

// Validator runs a candidate's tests and fills its test lists, or says
// why it is dropped (reason is one of the Drop constants).
type Validator interface {
	Validate(ctx context.Context, in *bench.Instance, base BaseFiles) (reason, detail string, err error)
}

// BaseFiles reads a file at a commit of the mined repository.
type BaseFiles func(commit, path string) ([]byte, error)

// Mine walks the history from HEAD, newest first, and returns the kept
// instances in that order with a report.
func Mine(ctx context.Context, cfg Config) ([]bench.Instance, Report, error) {
	cfg = defaults(cfg)
	rep := Report{Repo: cfg.Name, Skipped: map[string]int{}, DropReasons: map[string]int{}}
	t0 := time.Now()
	repo, err := open(ctx, cfg.Repo)
	if err != nil {
		return nil, rep, err
	}
	if cfg.Name == "" {
		cfg.Name = repoName(repo, cfg.Repo)
		rep.Repo = cfg.Name
	}
	cands, prs, err := walk(repo, cfg, &rep)
	if err != nil {
		return nil, rep, err
	}
	rep.Candidates = len(cands)
	if cfg.Issues != nil {
		problems(ctx, cfg, cands, prs)
	}
	rep.WalkSeconds = time.Since(t0).Seconds()
	if cfg.Validator == nil {
		if cfg.Max > 0 && len(cands) > cfg.Max {
			cands = cands[:cfg.Max]
		}
		rep.Kept = len(cands)
		return cands, rep, nil
	}
	t1 := time.Now()
	kept, err := validateAll(ctx, cfg, repo, cands, &rep)
	rep.ValidateSeconds = time.Since(t1).Seconds()
	return kept, rep, err
}

func defaults(cfg Config) Config {
	if cfg.MaxPatchBytes <= 0 {
		cfg.MaxPatchBytes = 200 << 10
	}
	if cfg.MaxFiles <= 0 {
		cfg.MaxFiles = 50
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CloneURL == "" {
		cfg.CloneURL = cfg.Repo
		if !strings.Contains(cfg.Repo, "://") {
			if abs, err := filepath.Abs(cfg.Repo); err == nil {
				cfg.CloneURL = abs
			}
		}
	}
	return cfg
}

// open opens a local repository, or clones a URL into memory.
func open(ctx context.Context, repo string) (*git.Repository, error) {
	if strings.Contains(repo, "://") && !strings.HasPrefix(repo, "file://") {
		r, err := git.CloneContext(ctx, memory.NewStorage(), nil, &git.CloneOptions{URL: repo, Tags: git.NoTags})
		if err != nil {
			return nil, fmt.Errorf("mine: clone %s: %w", repo, err)
		}
		return r, nil
	}
	p := strings.TrimPrefix(repo, "file://")
	r, err := git.PlainOpenWithOptions(p, &git.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return nil, fmt.Errorf("mine: open %s: %w", repo, err)
	}
	return r, nil
}

var githubRemote = regexp.MustCompile(`github\.com[:/]([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$`)

// repoName is "owner/repo" from a GitHub origin, else the directory name.
func repoName(r *git.Repository, repo string) string {
	if rem, err := r.Remote("origin"); err == nil {
		for _, u := range rem.Config().URLs {
			if m := githubRemote.FindStringSubmatch(u); m != nil {
				return m[1] + "/" + m[2]
			}
		}
	}
	if u, err := url.Parse(repo); err == nil && u.Host != "" {
		if m := githubRemote.FindStringSubmatch(u.Host + u.Path); m != nil {
			return m[1] + "/" + m[2]
		}
		repo = u.Path
	}
	base := filepath.Base(strings.TrimSuffix(strings.TrimSuffix(repo, "/"), "/.git"))
	return strings.TrimSuffix(strings.TrimSuffix(base, ".git"), ".bundle")
}

// walk lists the candidates from HEAD, newest first, and the pull request
// each commit came in with, when its history says.
func walk(repo *git.Repository, cfg Config, rep *Report) ([]bench.Instance, map[string]int, error) {
	head, err := repo.Head()
	if err != nil {
		return nil, nil, fmt.Errorf("mine: HEAD: %w", err)
	}
	opts := &git.LogOptions{From: head.Hash(), Order: git.LogOrderCommitterTime}
	if !cfg.Since.IsZero() {
		opts.Since = &cfg.Since
	}
	iter, err := repo.Log(opts)
	if err != nil {
		return nil, nil, fmt.Errorf("mine: log: %w", err)
	}
	defer iter.Close()
	lim := limits{maxPatchBytes: cfg.MaxPatchBytes, maxFiles: cfg.MaxFiles}
	var cands []bench.Instance
	var merges []*object.Commit
	for {
		c, err := iter.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("mine: log: %w", err)
		}
		rep.Commits++
		if c.NumParents() > 1 {
			merges = append(merges, c)
		}
		in, skip, err := candidate(c, cfg.Name, cfg.CloneURL, lim)
		if err != nil {
			return nil, nil, err
		}
		if skip != "" {
			rep.Skipped[skip]++
			continue
		}
		cands = append(cands, in)
	}
	return cands, pullRequests(repo, head.Hash(), merges), nil
}

// validateAll validates candidates in history order with cfg.Concurrency
// at once, until cfg.Max are kept.
func validateAll(ctx context.Context, cfg Config, repo *git.Repository, cands []bench.Instance, rep *Report) ([]bench.Instance, error) {
	base := func(commit, path string) ([]byte, error) { return readBlob(repo, commit, path) }
	outs := make([]*Outcome, len(cands))
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	kept := 0
	bench.ForEach(ctx, len(cands), cfg.Concurrency, func(i int) {
		t0 := time.Now()
		reason, detail, err := cfg.Validator.Validate(ctx, &cands[i], base)
		if ctx.Err() != nil {
			return // cancelled: Max was reached, or the caller gave up
		}
		o := Outcome{Commit: cands[i].Commit, InstanceID: cands[i].InstanceID, Kept: err == nil && reason == "",
			Reason: reason, Detail: detail, Seconds: time.Since(t0).Seconds()}
		if err != nil {
			o.Reason, o.Detail = DropInfra, err.Error()
		}
		mu.Lock()
		outs[i] = &o
		if o.Kept {
			kept++
		}
		// Max counts only the kept instances before which every
		// candidate is settled, so the kept set does not depend on
		// which validation finished first.
		if cfg.Max > 0 && settledKept(outs) >= cfg.Max {
			cancel()
		}
		if cfg.Progress != nil {
			cfg.Progress(o)
		}
		mu.Unlock()
	})
	var out []bench.Instance
	for i, o := range outs {
		if o == nil || (cfg.Max > 0 && len(out) >= cfg.Max) {
			continue
		}
		rep.Outcomes = append(rep.Outcomes, *o)
		if o.Kept {
			out = append(out, cands[i])
			rep.Kept++
		} else {
			rep.Dropped++
			rep.DropReasons[o.Reason]++
		}
	}
	if err := parent.Err(); err != nil {
		return out, fmt.Errorf("mine: validation stopped: %w", err)
	}
	return out, nil
}

// settledKept counts the kept outcomes of the longest settled prefix.
func settledKept(outs []*Outcome) int {
	n := 0
	for _, o := range outs {
		if o == nil {
			break
		}
		if o.Kept {
			n++
		}
	}
	return n
}

func readBlob(repo *git.Repository, commit, path string) ([]byte, error) {
	c, err := repo.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		return nil, err
	}
	f, err := c.File(path)
	if err != nil {
		return nil, fmt.Errorf("%s at %s: %w", path, commit, errNotExist(err))
	}
	s, err := f.Contents()
	return []byte(s), err
}
