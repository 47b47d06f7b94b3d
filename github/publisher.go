package github

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// PublisherConfig configures a [Publisher].
type PublisherConfig struct {
	// Token authenticates the REST calls (Bearer) and the git push (basic
	// auth, user x-access-token); required. Scopes: contents, pull
	// requests and issues, read and write. It never appears in an error,
	// a log line, a commit or a comment.
	Token string
	// APIURL is the REST API root (DefaultAPIURL when empty).
	APIURL string
	// WebURL is the web root repositories are cloned from and pushed to
	// (DefaultWebURL when empty). A task's repository URL must be
	// WebURL/owner/repo.git for the issue it names.
	WebURL string
	// HTTPClient sends REST calls (a client with a 30s timeout when nil).
	HTTPClient *http.Client
	// CABundle is extra PEM certificates git trusts (e.g. a GitHub
	// Enterprise Server's own CA).
	CABundle []byte
	// CacheDir, when set, keeps one bare repository per remote there, so
	// later publishes fetch only what is new; it must not be shared by
	// two processes. Empty: a temporary repository per publish.
	CacheDir string
	// AuthorName and AuthorEmail sign the commits ("Wrench" and
	// "wrench@users.noreply.github.com" when empty).
	AuthorName, AuthorEmail string
	// Draft opens pull requests as drafts.
	Draft bool
	// TaskURL, when set, returns a link to a task (e.g. its status in the
	// API or a dashboard) for pull request bodies and comments.
	TaskURL func(id string) string
	// Timeout bounds one publish when it runs from [Publisher.Wrap]
	// (5 minutes when zero).
	Timeout time.Duration
	// Logger receives one line per publish; nil discards.
	Logger *slog.Logger
}

// Publisher publishes GitHub tasks' results: a branch, a pull request and
// an issue comment for a resolved task, a comment alone otherwise. It is
// safe for concurrent use.
type Publisher struct {
	cfg PublisherConfig
	api *Client
	git *gitWork
	web *url.URL
	log *slog.Logger
}

// NewPublisher checks cfg and returns a Publisher.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	if cfg.Token == "" {
		return nil, errors.New("github: publisher Token is required")
	}
	web, err := parseWebURL(cfg.WebURL)
	if err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	api, err := NewClient(ClientConfig{BaseURL: cfg.APIURL, Token: cfg.Token, HTTPClient: hc})
	if err != nil {
		return nil, err
	}
	if cfg.AuthorName == "" {
		cfg.AuthorName = "Wrench"
	}
	if cfg.AuthorEmail == "" {
		cfg.AuthorEmail = "wrench@users.noreply.github.com"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Minute
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Publisher{cfg: cfg, api: api, web: web, log: log,
		git: &gitWork{token: cfg.Token, caBundle: cfg.CABundle, cacheDir: cfg.CacheDir,
			author: cfg.AuthorName, email: cfg.AuthorEmail}}, nil
}

// Client returns the publisher's REST client.
func (p *Publisher) Client() *Client { return p.api }

// BranchName is the branch a task's pull request comes from.
func BranchName(taskID string) string { return "wrench/" + taskID }

// issueRef is a parsed Source.Issue.
type issueRef struct {
	owner, repo string
	number      int
}

func (r issueRef) String() string { return fmt.Sprintf("%s/%s#%d", r.owner, r.repo, r.number) }

var issuePattern = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9-]*)/([A-Za-z0-9._-]+)#([1-9][0-9]{0,9})$`)

// parseIssue reads "owner/repo#N".
func parseIssue(s string) (issueRef, error) {
	m := issuePattern.FindStringSubmatch(s)
	if m == nil || m[2] == "." || m[2] == ".." {
		return issueRef{}, fmt.Errorf("%w: source.issue %q is not owner/repo#N", ErrNotGitHubTask, s)
	}
	n, _ := strconv.Atoi(m[3])
	return issueRef{owner: m[1], repo: m[2], number: n}, nil
}

var fullSHA = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

// Publish publishes r, the final result of GitHub task t, and returns the
// pull request's URL ("" when none was opened).
//
// For a resolved result with a patch, when t asks for a pull request
// (Output.PullRequest), it commits the patch on r.BaseCommit, pushes
// branch wrench/<task id>, opens a pull request into Output.PullRequest.Base
// (t.Repo.Ref when empty) and comments on the issue with its link. For
// any other result it only comments on the issue: the status, reason,
// summary, tests and the patch (truncated), and pushes nothing. When the
// pull request cannot be made (the patch does not apply, GitHub refuses
// it), the comment says why and carries the patch, and the error is
// returned too.
//
// Publish is idempotent: a pull request whose head is the task's branch
// (open or closed) is reused, not opened again, and a comment is not
// written twice (each carries a hidden marker naming the task). Errors
// wrap [ErrNotGitHubTask] for a task without a GitHub source, and
// [*APIError] for REST failures; none carries the token.
func (p *Publisher) Publish(ctx context.Context, t task.Task, r task.Result) (prURL string, err error) {
	ref, cloneURL, err := p.check(t)
	if err != nil {
		return "", err
	}
	start := time.Now()
	log := p.log.With("task_id", t.ID, "issue", ref.String(), "status", string(r.Status))
	defer func() {
		err = redact(err, p.cfg.Token)
		if err != nil {
			log.Warn("github publish failed", "err", err, "duration", time.Since(start))
			return
		}
		log.Info("github published", "pull_request", prURL, "duration", time.Since(start))
	}()
	if r.Status != task.StateResolved || t.Output.PullRequest == nil || strings.TrimSpace(r.Patch) == "" {
		return "", p.comment(ctx, t, ref, markResult, p.resultComment(t, r, nil))
	}
	prURL, err = p.pullRequest(ctx, t, r, ref, cloneURL)
	if err != nil {
		if cerr := p.comment(ctx, t, ref, markFailed, p.resultComment(t, r, redact(err, p.cfg.Token))); cerr != nil {
			return "", errors.Join(err, cerr)
		}
		return "", err
	}
	return prURL, p.comment(ctx, t, ref, markOpened, p.openedComment(t, r, prURL))
}

// check validates that t is a GitHub task whose repository is the issue's
// repository on WebURL, and returns the issue and the clone URL.
func (p *Publisher) check(t task.Task) (issueRef, string, error) {
	if t.Source.Kind != "github" {
		return issueRef{}, "", fmt.Errorf("%w: source kind %q", ErrNotGitHubTask, t.Source.Kind)
	}
	ref, err := parseIssue(t.Source.Issue)
	if err != nil {
		return issueRef{}, "", err
	}
	want := p.web.String() + "/" + ref.owner + "/" + ref.repo + ".git"
	got := strings.TrimSpace(t.Repo.URL)
	if !strings.EqualFold(got, want) && !strings.EqualFold(got+".git", want) {
		return issueRef{}, "", fmt.Errorf("%w: repository %q is not %s", ErrNotGitHubTask, got, want)
	}
	return ref, want, nil
}

// pullRequest finds or makes the task's pull request and returns its URL.
func (p *Publisher) pullRequest(ctx context.Context, t task.Task, r task.Result, ref issueRef, cloneURL string) (string, error) {
	branch := BranchName(t.ID)
	if pr, ok, err := p.api.FindPullRequest(ctx, ref.owner, ref.repo, branch); err != nil {
		return "", fmt.Errorf("find pull request for %s: %w", branch, err)
	} else if ok {
		return pr.HTMLURL, nil
	}
	if !fullSHA.MatchString(r.BaseCommit) {
		return "", fmt.Errorf("%w: result's base commit %q is not a full sha", ErrBaseNotFound, r.BaseCommit)
	}
	base := t.Repo.Ref
	if t.Output.PullRequest.Base != "" {
		base = t.Output.PullRequest.Base
	}
	if base == "" {
		return "", errors.New("no base branch: set output.pull_request.base or repo.ref")
	}
	when := r.FinishedAt
	if when.IsZero() {
		when = time.Now()
	}
	if _, err := p.git.push(ctx, commitSpec{cloneURL: cloneURL, base: r.BaseCommit, branch: base,
		patch: r.Patch, message: commitMessage(t, r, ref), when: when, head: branch}); err != nil {
		return "", err
	}
	pr, err := p.api.CreatePullRequest(ctx, ref.owner, ref.repo, NewPullRequest{
		Title: title(t, ref), Head: branch, Base: base, Body: p.prBody(t, r, ref), Draft: p.cfg.Draft,
	})
	if alreadyExists(err) {
		// Another publish of this task got there first.
		found, ok, ferr := p.api.FindPullRequest(ctx, ref.owner, ref.repo, branch)
		if ferr == nil && ok {
			return found.HTMLURL, nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("open pull request %s -> %s: %w", branch, base, err)
	}
	return pr.HTMLURL, nil
}

// comment posts body on the task's issue unless a comment of this kind
// for this task is already there.
func (p *Publisher) comment(ctx context.Context, t task.Task, ref issueRef, kind, body string) error {
	existing, err := p.api.ListIssueComments(ctx, ref.owner, ref.repo, ref.number)
	if err != nil {
		return fmt.Errorf("list comments on %s: %w", ref, err)
	}
	m := marker(t.ID, kind)
	for _, c := range existing {
		if strings.Contains(c.Body, m) {
			return nil
		}
	}
	if _, err := p.api.CreateIssueComment(ctx, ref.owner, ref.repo, ref.number, body); err != nil {
		return fmt.Errorf("comment on %s: %w", ref, err)
	}
	return nil
}

// OnFinal publishes r when t is a GitHub task and returns r with
// PullRequestURL set when a pull request exists. For any other task it is
// a no-op returning r and nil. Call it after a task's final result, before
// (or instead of after) storing it.
func (p *Publisher) OnFinal(ctx context.Context, t task.Task, r task.Result) (task.Result, error) {
	if t.Source.Kind != "github" || !r.Status.Final() {
		return r, nil
	}
	u, err := p.Publish(ctx, t, r)
	if u != "" {
		r.PullRequestURL = u
	}
	return r, err
}

// Runner runs one task attempt; dispatcher.Runner has this method, so the
// dispatcher's runner can be wrapped with [Publisher.Wrap] without this
// package importing the dispatcher.
type Runner interface {
	Run(ctx context.Context, t task.Task, attempt int, onEvent func(task.Event)) task.Report
}

// Wrap returns a Runner that runs next and then, when the report is final
// and the task came from GitHub, publishes the result before handing the
// report back, so the stored result carries PullRequestURL. Reports are
// not published when they ask for a retry, nor when ctx is done and the
// result is not resolved: the dispatcher then either records a
// cancellation or hands the task back at shutdown, and the runner cannot
// tell which (so a task cancelled by a user gets no comment, and neither
// does one dead-lettered after its last retry). Publishing runs on a
// context detached from ctx, bounded by PublisherConfig.Timeout. A publish
// failure does not change the task's status: it is reported as an error
// log event ("github publish: …").
func (p *Publisher) Wrap(next Runner) Runner {
	return publishingRunner{next: next, p: p}
}

type publishingRunner struct {
	next Runner
	p    *Publisher
}

// Run runs the wrapped runner and publishes its final report.
func (pr publishingRunner) Run(ctx context.Context, t task.Task, attempt int, onEvent func(task.Event)) task.Report {
	rep := pr.next.Run(ctx, t, attempt, onEvent)
	if rep.Retry || t.Source.Kind != "github" {
		return rep
	}
	if ctx.Err() != nil && rep.Result.Status != task.StateResolved {
		// Cancelled or shutting down: the dispatcher keeps only resolved
		// work then (a shutdown hands the task back to run again), so
		// nothing else is final yet.
		return rep
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pr.p.cfg.Timeout)
	defer cancel()
	res, err := pr.p.OnFinal(pctx, t, rep.Result)
	rep.Result = res
	if onEvent != nil {
		ev := task.Event{TaskID: t.ID, Time: time.Now().UTC(), Kind: task.EventLog}
		switch {
		case err != nil:
			ev.IsError, ev.Text = true, "github publish: "+err.Error()
		case res.PullRequestURL != "":
			ev.Text = "github: pull request " + res.PullRequestURL
		default:
			ev.Text = "github: commented on " + t.Source.Issue
		}
		onEvent(ev)
	}
	return rep
}
