package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/task"
)

// Follow-ups: `/wrench <instruction>` in a review comment
// (pull_request_review_comment) or a conversation comment (issue_comment on
// a pull request) of a pull request Wrench opened starts a task on that
// pull request's branch.

// reviewPayload is the part of a pull_request_review_comment payload the
// webhook reads.
type reviewPayload struct {
	Action  string `json:"action"`
	Comment *struct {
		ID                int64  `json:"id"`
		Body              string `json:"body"`
		Path              string `json:"path"`
		Line              int    `json:"line"`
		DiffHunk          string `json:"diff_hunk"`
		InReplyToID       int64  `json:"in_reply_to_id"`
		AuthorAssociation string `json:"author_association"`
		User              User   `json:"user"`
	} `json:"comment"`
	PullRequest *prPayload   `json:"pull_request"`
	Repository  *repoPayload `json:"repository"`
}

// prPayload is a pull request in a payload or an API answer.
type prPayload struct {
	Number int    `json:"number"`
	Title  string `json:"title"`
	State  string `json:"state"`
	Head   struct {
		Ref  string `json:"ref"`
		SHA  string `json:"sha"`
		Repo *struct {
			FullName string `json:"full_name"`
		} `json:"repo"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
	} `json:"base"`
}

// repoPayload is a payload's repository.
type repoPayload struct {
	Name          string `json:"name"`
	FullName      string `json:"full_name"`
	CloneURL      string `json:"clone_url"`
	DefaultBranch string `json:"default_branch"`
}

// followUp is what a follow-up request needs, whichever event carried it.
type followUp struct {
	repo      *repoPayload
	pr        prPayload
	commentID int64 // the asking comment
	review    bool  // a review comment (its thread is answered)
	author    User
	request   string // the text after /wrench
	path      string
	line      int
	hunk      string
	threadOf  int64 // the review thread's first comment
}

// reviewCommentTask turns a pull_request_review_comment delivery into a
// follow-up.
func (w *Webhook) reviewCommentTask(ctx context.Context, delivery string, data []byte) (*task.Task, string, error) {
	var p reviewPayload
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, "", fmt.Errorf("pull_request_review_comment payload: %w", err)
	}
	if p.Comment == nil || p.PullRequest == nil || p.Repository == nil || p.Repository.FullName == "" {
		return nil, "", errors.New("pull_request_review_comment payload: comment, pull_request and repository are required")
	}
	if p.Action != "created" {
		return nil, "pull_request_review_comment action " + p.Action + " does not start tasks", nil
	}
	rest, ok := cutCommand(p.Comment.Body, w.cfg.CommandPrefix)
	if !ok {
		return nil, "comment does not start with " + w.cfg.CommandPrefix, nil
	}
	root := p.Comment.InReplyToID
	if root == 0 {
		root = p.Comment.ID
	}
	return w.followUpTask(ctx, delivery, followUp{repo: p.Repository, pr: *p.PullRequest, commentID: p.Comment.ID, review: true,
		author: p.Comment.User, request: rest, path: p.Comment.Path, line: p.Comment.Line, hunk: p.Comment.DiffHunk, threadOf: root})
}

// prConversationTask turns a /wrench comment on a pull request's
// conversation (an issue_comment delivery) into a follow-up; it reads the
// pull request from the API.
func (w *Webhook) prConversationTask(ctx context.Context, delivery string, p eventPayload, rest string) (*task.Task, string, error) {
	if w.cfg.API == nil {
		return nil, "follow-ups on pull requests need GitHub credentials on the server", nil
	}
	owner, name, _ := strings.Cut(p.Repository.FullName, "/")
	var pr prPayload
	_, err := w.cfg.API.repoDo(ctx, owner, name, "GET", repoPath(owner, name, "pulls", strconv.Itoa(p.Issue.Number)), nil, nil, &pr)
	if err != nil {
		return nil, "", fmt.Errorf("%w: read pull request #%d: %w", errUpstream, p.Issue.Number, err)
	}
	repo := &repoPayload{Name: p.Repository.Name, FullName: p.Repository.FullName, CloneURL: p.Repository.CloneURL,
		DefaultBranch: p.Repository.DefaultBranch}
	return w.followUpTask(ctx, delivery, followUp{repo: repo, pr: pr, commentID: p.Comment.ID,
		author: User{Login: p.Comment.User.Login, Type: p.Comment.User.Type}, request: rest})
}

// errUpstream marks a failure to read GitHub while handling a delivery:
// the delivery is answered 503, so it can be redelivered.
var errUpstream = errors.New("github API")

// followUpTask checks a follow-up request (a Wrench pull request from this
// repository, open, asked for by someone with write access) and builds
// its task.
func (w *Webhook) followUpTask(ctx context.Context, delivery string, f followUp) (*task.Task, string, error) {
	full := f.repo.FullName
	if w.allowed != nil && !w.allowed[strings.ToLower(full)] {
		return nil, "repository " + full + " is not in the allowlist", nil
	}
	if f.author.Type == "Bot" || strings.HasSuffix(f.author.Login, "[bot]") {
		return nil, "comment is by a bot (" + f.author.Login + ")", nil
	}
	if !strings.HasPrefix(f.pr.Head.Ref, "wrench/") || f.pr.Head.Repo == nil || !strings.EqualFold(f.pr.Head.Repo.FullName, full) {
		return nil, fmt.Sprintf("pull request #%d is not one Wrench opened", f.pr.Number), nil
	}
	if f.pr.State != "" && f.pr.State != "open" {
		return nil, fmt.Sprintf("pull request #%d is %s", f.pr.Number, f.pr.State), nil
	}
	if w.cfg.API == nil {
		return nil, "follow-ups on pull requests need GitHub credentials on the server", nil
	}
	owner, name, ok := splitFullName(full)
	if !ok {
		return nil, "", fmt.Errorf("repository full_name %q is not owner/repo", full)
	}
	if err := w.checkCloneURL(f.repo.CloneURL, full); err != nil {
		return nil, "", err
	}
	if !fullSHA.MatchString(f.pr.Head.SHA) {
		return nil, "", fmt.Errorf("pull request #%d: head sha %q is not a full sha", f.pr.Number, f.pr.Head.SHA)
	}
	perm, err := w.permissions.get(ctx, w.cfg.API, owner, name, f.author.Login)
	if err != nil {
		return nil, "", fmt.Errorf("%w: permission of %s on %s: %w", errUpstream, f.author.Login, full, err)
	}
	if !writeRoles[perm] {
		return nil, fmt.Sprintf("%s has %s access to %s; follow-ups need write", f.author.Login, perm, full), nil
	}
	var thread []ReviewComment
	if f.review {
		thread = w.thread(ctx, owner, name, f.pr.Number, f.threadOf)
	}
	kind := "prcomment"
	var review int64
	if f.review {
		kind, review = "review", f.commentID
	}
	return &task.Task{
		ID:          taskID(owner, name, f.pr.Number, kind+"\x00"+strconv.FormatInt(f.commentID, 10)),
		Repo:        task.Repo{URL: f.repo.CloneURL, Ref: f.pr.Head.Ref, Commit: f.pr.Head.SHA},
		Instruction: followUpInstruction(f, thread),
		Limits:      w.cfg.Limits,
		Output:      task.Output{PullRequest: &task.PullRequest{Base: f.pr.Base.Ref, Number: f.pr.Number, Branch: f.pr.Head.Ref}},
		Source: task.Source{Kind: "github", Delivery: delivery, ReviewComment: review,
			Issue: fmt.Sprintf("%s/%s#%d", owner, name, f.pr.Number)},
	}, "", nil
}

// writeRoles are the repository roles that may ask for follow-ups.
var writeRoles = map[string]bool{"admin": true, "maintain": true, "write": true}

// thread returns the review thread rooted at root, oldest first; on an
// API failure, nothing (the request and its hunk still make the task).
func (w *Webhook) thread(ctx context.Context, owner, name string, number int, root int64) []ReviewComment {
	all, err := w.cfg.API.ListReviewComments(ctx, owner, name, number)
	if err != nil {
		w.log.Warn("read review thread", "pull_request", number, "err", err)
		return nil
	}
	var out []ReviewComment
	for _, c := range all {
		if c.ID == root || c.InReplyToID == root {
			out = append(out, c)
		}
	}
	return out
}

var markerLine = regexp.MustCompile(`(?m)^<!-- wrench:[^>]*-->\s*$`)

// followUpInstruction tells the agent what is asked, where, and the
// discussion around it.
func followUpInstruction(f followUp, thread []ReviewComment) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", clip(strings.Join(strings.Fields(f.pr.Title), " "), maxTitle))
	fmt.Fprintf(&b, "Follow-up on pull request #%d (branch %s, checked out): change it as asked below; the change becomes a new commit on the pull request.\n\n",
		f.pr.Number, f.pr.Head.Ref)
	where := "in a comment on the pull request"
	if f.review {
		where = "in a review comment"
		if f.path != "" {
			where += " on " + f.path
			if f.line > 0 {
				where += fmt.Sprintf(" line %d", f.line)
			}
		}
	}
	fmt.Fprintf(&b, "Request from @%s %s:\n\n%s\n", f.author.Login, where, clip(f.request, maxComment))
	if len(thread) > 1 {
		b.WriteString("\nThe review thread:\n\n")
		budget := maxBody
		for _, c := range thread {
			text := strings.TrimSpace(markerLine.ReplaceAllString(c.Body, ""))
			entry := fmt.Sprintf("@%s: %s\n\n", c.User.Login, text)
			if len(entry) > budget {
				b.WriteString("[… earlier comments cut]\n\n")
				break
			}
			budget -= len(entry)
			b.WriteString(entry)
		}
	}
	if h := strings.TrimSpace(f.hunk); h != "" {
		fence := fenceFor(h)
		fmt.Fprintf(&b, "\nThe diff hunk it refers to:\n\n%sdiff\n%s\n%s\n", fence, clip(h, maxComment), fence)
	}
	return b.String()
}

// permCache remembers collaborators' permissions briefly, so a burst of
// comments costs one API call.
type permCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]permEntry
}

type permEntry struct {
	perm    string
	expires time.Time
}

func (c *permCache) get(ctx context.Context, api *Client, owner, repo, user string) (string, error) {
	key := strings.ToLower(owner + "/" + repo + "\x00" + user)
	c.mu.Lock()
	if e, ok := c.m[key]; ok && time.Now().Before(e.expires) {
		c.mu.Unlock()
		return e.perm, nil
	}
	c.mu.Unlock()
	perm, err := api.CollaboratorPermission(ctx, owner, repo, user)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]permEntry{}
	}
	c.m[key] = permEntry{perm: perm, expires: time.Now().Add(c.ttl)}
	c.mu.Unlock()
	return perm, nil
}

// refused checks t against the policy. A repository the policy refuses
// gets a comment on t's issue (once: it carries a marker) saying why and
// how an operator allows it; reason says what was done.
func (w *Webhook) refused(ctx context.Context, t task.Task) (reason string, denied bool) {
	if w.cfg.Policy == nil {
		return "", false
	}
	var d *policy.ErrDenied
	if err := w.cfg.Policy.Admit(t); !errors.As(err, &d) {
		return "", false
	}
	reason = d.Error()
	ref, err := parseIssue(t.Source.Issue)
	if w.cfg.API == nil || err != nil {
		return reason + " (no GitHub credentials to tell the issue)", true
	}
	m := marker(t.ID, "denied")
	body := fmt.Sprintf("Wrench cannot work on this: %s.\n\n%s\n\n%s\n", reason, d.HowToAllow(), m)
	if err := w.commentOnce(ctx, ref, m, body); err != nil {
		w.log.Warn("tell the issue its repository is refused", "issue", ref.String(), "err", err)
		return reason + "; could not comment: " + err.Error(), true
	}
	return reason + "; the issue was told how to allow it", true
}

// commentOnce comments body on ref unless a comment carrying m is there.
func (w *Webhook) commentOnce(ctx context.Context, ref issueRef, m, body string) error {
	cs, err := w.cfg.API.ListIssueComments(ctx, ref.owner, ref.repo, ref.number)
	if err != nil {
		return err
	}
	for _, c := range cs {
		if strings.Contains(c.Body, m) {
			return nil
		}
	}
	_, err = w.cfg.API.CreateIssueComment(ctx, ref.owner, ref.repo, ref.number, body)
	return err
}
