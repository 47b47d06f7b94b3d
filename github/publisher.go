package github

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/internal/logctx"
	"github.com/wrenchworks/wrench/task"
)

// PublisherConfig configures a [Publisher].
type PublisherConfig struct {
	// Token authenticates the REST calls (Bearer) and the git push (basic
	// auth, user x-access-token): a personal access token. Scopes:
	// contents, pull requests and issues, read and write. It never appears
	// in an error, a log line, a commit or a comment. Ignored when Tokens
	// is set; one of them is required.
	Token string
	// Tokens gives a token per repository: a GitHub App ([*App]), whose
	// installation tokens are minted per repository and refreshed before
	// they expire, so a publish long after the task started still works.
	Tokens TokenSource
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
	// Draft opens every pull request as a draft.
	Draft bool
	// DraftWithoutTests says, per repository URL, whether a result that
	// passed only because there was no test command opens a draft pull
	// request (the server policy's draft_without_tests); nil: always.
	DraftWithoutTests func(repoURL string) bool
	// UntestedLabel labels such pull requests ("wrench: untested" when
	// empty).
	UntestedLabel string
	// Ledger records every effect so that it happens once across
	// redeliveries, paused workers and racing ones (a MemoryLedger, good
	// for one process only, when nil).
	Ledger Ledger
	// SetPullRequest, when set, records a task's pull request on its
	// stored result (the dispatcher stores the result before publishing).
	SetPullRequest func(ctx context.Context, taskID, url string) error
	// TaskURL, when set, returns a link to a task (e.g. its status in the
	// API or a dashboard) for pull request bodies and comments.
	TaskURL func(id string) string
	// ArtifactURL, when set, returns a link to one of a task's artifacts
	// (its trajectory) for the evidence table.
	ArtifactURL func(id, name string) string
	// Logger receives one line per publish; nil discards.
	Logger *slog.Logger
}

// Publisher publishes GitHub tasks' results: a branch, a pull request and
// an issue comment for a verified result, a comment alone otherwise, a
// commit and a reply for a follow-up asked for on a pull request. Every
// effect goes through the Ledger. It is safe for concurrent use.
type Publisher struct {
	cfg    PublisherConfig
	api    *Client
	git    *gitWork
	web    *url.URL
	log    *slog.Logger
	ledger Ledger
}

// NewPublisher checks cfg and returns a Publisher.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	if cfg.Tokens == nil && cfg.Token != "" {
		cfg.Tokens = StaticToken(cfg.Token)
	}
	if cfg.Tokens == nil {
		return nil, errors.New("github: publisher needs a Token or Tokens")
	}
	web, err := parseWebURL(cfg.WebURL)
	if err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	api, err := NewClient(ClientConfig{BaseURL: cfg.APIURL, Tokens: cfg.Tokens, HTTPClient: hc})
	if err != nil {
		return nil, err
	}
	if cfg.AuthorName == "" {
		cfg.AuthorName = "Wrench"
	}
	if cfg.AuthorEmail == "" {
		cfg.AuthorEmail = "wrench@users.noreply.github.com"
	}
	if cfg.UntestedLabel == "" {
		cfg.UntestedLabel = DefaultUntestedLabel
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ledger := cfg.Ledger
	if ledger == nil {
		ledger = &MemoryLedger{}
	}
	return &Publisher{cfg: cfg, api: api, web: web, log: log, ledger: ledger,
		git: &gitWork{tokens: cfg.Tokens, caBundle: cfg.CABundle, cacheDir: cfg.CacheDir,
			author: cfg.AuthorName, email: cfg.AuthorEmail}}, nil
}

// DefaultUntestedLabel labels pull requests of results that passed only
// because there was no test command.
const DefaultUntestedLabel = "wrench: untested"

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
// pull request's URL ("" when there is none).
//
//   - A verified result (resolved, with a patch, a test command that ran
//     and passed) of a task asking for a pull request: the patch is
//     committed on r.BaseCommit and pushed to branch wrench/<task id>, a
//     pull request opened into Output.PullRequest.Base (t.Repo.Ref when
//     empty) with the evidence table in its body, and the issue commented
//     with its link.
//   - A resolved result with a patch but no test command: the same, the
//     pull request labelled UntestedLabel and, per DraftWithoutTests, a
//     draft.
//   - A follow-up (Output.PullRequest.Number set): the patch becomes a new
//     commit on that pull request's branch and the request is answered.
//   - Anything else (unresolved, failed, cancelled, timed out,
//     dead-lettered, rejected, resolved with no change or with failing
//     tests): the issue is commented with the outcome in plain words and
//     the work so far as a collapsed patch; nothing is pushed.
//
// When the change cannot be pushed or the pull request opened for a reason
// that retrying will not fix (the patch no longer applies, a missing
// permission), the issue is commented with why and the patch, and the
// error (matching [ErrReported]) is returned too.
//
// Every effect happens once: each is recorded in the Ledger under a claim
// whose fencing token is renewed immediately before acting, and looked for
// on GitHub (the pull request by its branch, a comment by its hidden
// marker) when a previous holder may have acted. Errors wrap
// [ErrNotGitHubTask], [ErrEffectsClaimed], [ErrFenced] or [*APIError];
// none carries the token.
func (p *Publisher) Publish(ctx context.Context, t task.Task, r task.Result) (prURL string, err error) {
	ref, cloneURL, err := p.check(t)
	if err != nil {
		return "", err
	}
	start := time.Now()
	log := logctx.Bind(ctx, p.log.With("task_id", t.ID, "issue", ref.String(), "status", string(r.Status)))
	tok, err := p.cfg.Tokens.Token(ctx, ref.owner, ref.repo)
	if err != nil {
		log.Warn("github publish failed", "err", err)
		return "", err
	}
	claim, err := p.ledger.Claim(ctx, t.ID)
	if err != nil {
		log.Info("github publish deferred", "err", err)
		return "", err
	}
	defer func() { _ = claim.Release(context.WithoutCancel(ctx)) }()
	run := &effectRun{claim: claim}
	defer func() {
		err = redact(err, tok.Value)
		if err != nil && !errors.Is(err, ErrReported) {
			log.Warn("github publish failed", "err", err, "effects", run.written, "duration", time.Since(start))
			return
		}
		log.Info("github published", "pull_request", prURL, "effects", run.written, "err", err, "duration", time.Since(start))
	}()
	if pr := t.Output.PullRequest; pr != nil && pr.Number > 0 {
		return p.followUp(ctx, run, t, r, ref, cloneURL)
	}
	switch decide(t, r) {
	case outVerified, outUntested:
		return p.openPullRequest(ctx, run, t, r, ref, cloneURL)
	}
	return "", p.comment(ctx, run, t, ref, markResult, p.resultComment(t, r, nil))
}

// outcome is what a result becomes on GitHub.
type outcome int

const (
	outComment  outcome = iota // a comment on the issue
	outVerified                // a pull request with evidence
	outUntested                // a labelled (draft) pull request
	outFollowUp                // a commit on an existing pull request and a reply
)

// decide maps a task and its result to what it becomes on GitHub.
func decide(t task.Task, r task.Result) outcome {
	if r.Status != task.StateResolved || t.Output.PullRequest == nil || strings.TrimSpace(r.Patch) == "" {
		return outComment
	}
	if t.Output.PullRequest.Number > 0 {
		return outFollowUp
	}
	switch {
	case r.TestsAfter == nil || strings.TrimSpace(r.TestsAfter.Command) == "":
		return outUntested
	case r.TestsAfter.Passed:
		return outVerified
	}
	return outComment
}

// ErrReported matches a publish failure that the issue was told about
// (with the patch attached): retrying will not help, nothing is lost.
var ErrReported = errors.New("github: reported on the issue")

// reported wraps err as told to the issue.
func reported(err error) error { return fmt.Errorf("%w: %w", ErrReported, err) }

// permanent reports whether a push or pull request failure will fail the
// same way again.
func permanent(err error) bool {
	return errors.Is(err, ErrPatchDoesNotApply) || errors.Is(err, ErrBaseNotFound) ||
		errors.Is(err, ErrMissingPermission) || errors.Is(err, ErrValidation) || errors.Is(err, ErrNotFound)
}

// openPullRequest pushes the branch, opens the pull request, labels it
// when untested, and links it from the issue.
func (p *Publisher) openPullRequest(ctx context.Context, run *effectRun, t task.Task, r task.Result, ref issueRef, cloneURL string) (string, error) {
	untested := decide(t, r) == outUntested
	// Nothing is pushed for a pull request that could not be opened.
	err := p.need(ctx, ref, "open a pull request", "pull_requests")
	var prURL string
	if err == nil {
		prURL, err = p.pullRequest(ctx, run, t, r, ref, cloneURL, untested)
	}
	if err != nil {
		if !permanent(err) {
			return "", err
		}
		if cerr := p.comment(ctx, run, t, ref, markFailed, p.resultComment(t, r, err)); cerr != nil {
			return "", errors.Join(err, cerr)
		}
		return "", reported(err)
	}
	if untested {
		n := prNumber(prURL)
		if _, err := run.do(ctx, step{name: "label.untested", act: func(ctx context.Context) (string, error) {
			return p.cfg.UntestedLabel, p.api.AddLabels(ctx, ref.owner, ref.repo, n, p.cfg.UntestedLabel)
		}}); err != nil {
			return prURL, err
		}
	}
	if p.cfg.SetPullRequest != nil {
		if err := p.cfg.SetPullRequest(ctx, t.ID, prURL); err != nil {
			return prURL, fmt.Errorf("record pull request on the result: %w", err)
		}
	}
	return prURL, p.comment(ctx, run, t, ref, markOpened, p.openedComment(t, r, prURL))
}

// prNumber reads the number at the end of a pull request's URL.
func prNumber(u string) int {
	i := strings.LastIndexByte(u, '/')
	n, _ := strconv.Atoi(u[i+1:])
	return n
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

// pullRequest pushes the task's branch and finds or opens its pull
// request, returning its URL.
func (p *Publisher) pullRequest(ctx context.Context, run *effectRun, t task.Task, r task.Result, ref issueRef, cloneURL string, untested bool) (string, error) {
	branch := BranchName(t.ID)
	base := t.Repo.Ref
	if t.Output.PullRequest.Base != "" {
		base = t.Output.PullRequest.Base
	}
	if base == "" {
		return "", fmt.Errorf("%w: no base branch: set output.pull_request.base or repo.ref", ErrValidation)
	}
	find := func(ctx context.Context) (string, bool, error) {
		pr, ok, err := p.api.FindPullRequest(ctx, ref.owner, ref.repo, branch)
		return pr.HTMLURL, ok, err
	}
	if _, err := run.do(ctx, step{name: "push", act: func(ctx context.Context) (string, error) {
		if u, ok, err := find(ctx); err != nil || ok {
			// Its pull request is open already (a ledger that lost its
			// records): leave the branch as the pull request has it.
			return u, err
		}
		if !fullSHA.MatchString(r.BaseCommit) {
			return "", fmt.Errorf("%w: result's base commit %q is not a full sha", ErrBaseNotFound, r.BaseCommit)
		}
		when := r.FinishedAt
		if when.IsZero() {
			when = time.Now()
		}
		return p.git.push(ctx, commitSpec{owner: ref.owner, repo: ref.repo, cloneURL: cloneURL, base: r.BaseCommit,
			branch: base, patch: r.Patch, message: commitMessage(t, r, ref), when: when, head: branch, force: true})
	}}); err != nil {
		return "", err
	}
	return run.do(ctx, step{name: "pull_request", lookup: find, act: func(ctx context.Context) (string, error) {
		if err := p.need(ctx, ref, "open a pull request", "pull_requests"); err != nil {
			return "", err
		}
		draft := p.cfg.Draft || untested && (p.cfg.DraftWithoutTests == nil || p.cfg.DraftWithoutTests(t.Repo.URL))
		pr, err := p.api.CreatePullRequest(ctx, ref.owner, ref.repo, NewPullRequest{
			Title: title(t, ref), Head: branch, Base: base, Body: p.prBody(t, r, ref, untested), Draft: draft,
		})
		if alreadyExists(err) {
			// Another publish of this task got there first.
			if u, ok, ferr := find(ctx); ferr == nil && ok {
				return u, nil
			}
		}
		if err != nil {
			return "", fmt.Errorf("open pull request %s -> %s: %w", branch, base, err)
		}
		return pr.HTMLURL, nil
	}})
}

// comment posts body once on issue (or pull request) ref.number, as the
// effect comment.<kind>. The comment carries a hidden marker; when two
// holders both posted (one paused past its claim between its last check
// and its request), the oldest marked comment is the one kept, and each
// holder deletes its own younger one, so the issue ends with exactly one.
func (p *Publisher) comment(ctx context.Context, run *effectRun, t task.Task, ref issueRef, kind, body string) error {
	m := marker(t.ID, kind)
	marked := func(ctx context.Context) ([]IssueComment, error) {
		all, err := p.api.ListIssueComments(ctx, ref.owner, ref.repo, ref.number)
		if err != nil {
			return nil, fmt.Errorf("list comments on %s: %w", ref, err)
		}
		var out []IssueComment
		for _, c := range all {
			if strings.Contains(c.Body, m) {
				out = append(out, c)
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		return out, nil
	}
	_, err := run.do(ctx, step{name: "comment." + kind,
		lookup: func(ctx context.Context) (string, bool, error) {
			cs, err := marked(ctx)
			if err != nil || len(cs) == 0 {
				return "", false, err
			}
			// Keep the oldest; younger ones are duplicates of holders
			// that are gone (or fenced, and deleting their own).
			for _, c := range cs[1:] {
				if err := p.api.DeleteIssueComment(ctx, ref.owner, ref.repo, c.ID); err != nil {
					return "", false, fmt.Errorf("delete duplicate comment %d on %s: %w", c.ID, ref, err)
				}
			}
			return commentRef(cs[0].ID), true, nil
		},
		act: func(ctx context.Context) (string, error) {
			if err := p.need(ctx, ref, "comment on "+ref.String(), "issues"); err != nil {
				return "", err
			}
			c, err := p.api.CreateIssueComment(ctx, ref.owner, ref.repo, ref.number, body)
			if err != nil {
				return "", fmt.Errorf("comment on %s: %w", ref, err)
			}
			// The request may have gone out late; undo it when an older
			// holder's comment got there first.
			cs, err := marked(context.WithoutCancel(ctx))
			if err == nil && len(cs) > 0 && cs[0].ID < c.ID {
				if err := p.api.DeleteIssueComment(context.WithoutCancel(ctx), ref.owner, ref.repo, c.ID); err != nil {
					return "", fmt.Errorf("delete duplicate comment %d on %s: %w", c.ID, ref, err)
				}
				return commentRef(cs[0].ID), nil
			}
			return commentRef(c.ID), nil
		},
	})
	return err
}

// need returns a *PermissionError when the repository's token is known to
// lack perm at write.
func (p *Publisher) need(ctx context.Context, ref issueRef, op, perm string) error {
	tok, err := p.cfg.Tokens.Token(ctx, ref.owner, ref.repo)
	if err != nil {
		return err
	}
	return checkPermission(tok, ref.owner+"/"+ref.repo, op, perm, Write)
}

// Finalize publishes a final task's result when it came from GitHub: the
// dispatcher's Finalizer (it runs after the result is stored, and again on
// every redelivery of the final task, so effects already done are
// skipped). A failure the issue was told about is not an error (retrying
// would not help); any other one is, so that the task is finalized again
// later. Tasks from elsewhere are left alone.
func (p *Publisher) Finalize(ctx context.Context, st task.Status) error {
	if st.Task == nil || st.Result == nil || st.Task.Source.Kind != "github" || !st.State.Final() {
		return nil
	}
	_, err := p.Publish(ctx, *st.Task, *st.Result)
	if errors.Is(err, ErrReported) {
		return nil
	}
	return err
}
