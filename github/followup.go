package github

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// ErrBranchMoved: a follow-up's commit does not fast-forward the pull
// request's branch (someone pushed to it after the follow-up started).
var ErrBranchMoved = errors.New("github: the pull request's branch moved")

// followUp publishes a follow-up asked for on pull request
// Output.PullRequest.Number: a resolved result with a patch becomes a new
// commit on the pull request's branch (on the commit the follow-up
// started from, fast-forward only), and the request is answered — in its
// review thread when it came from a review comment, else on the pull
// request's conversation — with what was done, or in plain words why
// not, with the work so far attached.
func (p *Publisher) followUp(ctx context.Context, run *effectRun, t task.Task, r task.Result, ref issueRef, cloneURL string) (string, error) {
	pr := t.Output.PullRequest
	prRef := ref
	prRef.number = pr.Number
	prURL := fmt.Sprintf("%s/%s/%s/pull/%d", p.web, ref.owner, ref.repo, pr.Number)
	if r.Status != task.StateResolved || strings.TrimSpace(r.Patch) == "" {
		return prURL, p.reply(ctx, run, t, prRef, p.followUpReply(t, r, "", nil))
	}
	sha, err := run.do(ctx, step{name: "push", act: func(ctx context.Context) (string, error) {
		if !fullSHA.MatchString(r.BaseCommit) {
			return "", fmt.Errorf("%w: result's base commit %q is not a full sha", ErrBaseNotFound, r.BaseCommit)
		}
		when := r.FinishedAt
		if when.IsZero() {
			when = time.Now()
		}
		sha, err := p.git.push(ctx, commitSpec{owner: ref.owner, repo: ref.repo, cloneURL: cloneURL, base: r.BaseCommit,
			branch: pr.Branch, patch: r.Patch, message: commitMessage(t, r, ref), when: when, head: pr.Branch})
		if err != nil && strings.Contains(err.Error(), "non-fast-forward") {
			return "", fmt.Errorf("%w: %s is no longer at %s: %w", ErrBranchMoved, pr.Branch, short(r.BaseCommit), err)
		}
		return sha, err
	}})
	if err != nil {
		if !permanent(err) && !errors.Is(err, ErrBranchMoved) {
			return prURL, err
		}
		if rerr := p.reply(ctx, run, t, prRef, p.followUpReply(t, r, "", err)); rerr != nil {
			return prURL, errors.Join(err, rerr)
		}
		return prURL, reported(err)
	}
	return prURL, p.reply(ctx, run, t, prRef, p.followUpReply(t, r, sha, nil))
}

// reply answers a follow-up once (effect comment.reply): in the review
// thread of Source.ReviewComment, or on the pull request's conversation.
// Duplicates are resolved as for issue comments: the oldest stays.
func (p *Publisher) reply(ctx context.Context, run *effectRun, t task.Task, prRef issueRef, body string) error {
	thread := t.Source.ReviewComment
	if thread == 0 {
		return p.comment(ctx, run, t, prRef, markReply, body)
	}
	m := marker(t.ID, markReply)
	marked := func(ctx context.Context) ([]ReviewComment, error) {
		all, err := p.api.ListReviewComments(ctx, prRef.owner, prRef.repo, prRef.number)
		if err != nil {
			return nil, fmt.Errorf("list review comments on %s: %w", prRef, err)
		}
		var out []ReviewComment
		for _, c := range all {
			if strings.Contains(c.Body, m) {
				out = append(out, c)
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		return out, nil
	}
	_, err := run.do(ctx, step{name: "comment." + markReply,
		lookup: func(ctx context.Context) (string, bool, error) {
			cs, err := marked(ctx)
			if err != nil || len(cs) == 0 {
				return "", false, err
			}
			for _, c := range cs[1:] {
				if err := p.api.DeleteReviewComment(ctx, prRef.owner, prRef.repo, c.ID); err != nil {
					return "", false, fmt.Errorf("delete duplicate reply %d on %s: %w", c.ID, prRef, err)
				}
			}
			return commentRef(cs[0].ID), true, nil
		},
		act: func(ctx context.Context) (string, error) {
			if err := p.need(ctx, prRef, "answer a review comment on "+prRef.String(), "pull_requests"); err != nil {
				return "", err
			}
			c, err := p.api.ReplyToReviewComment(ctx, prRef.owner, prRef.repo, prRef.number, thread, body)
			if err != nil {
				return "", fmt.Errorf("answer review comment %d on %s: %w", thread, prRef, err)
			}
			cs, err := marked(context.WithoutCancel(ctx))
			if err == nil && len(cs) > 0 && cs[0].ID < c.ID {
				if err := p.api.DeleteReviewComment(context.WithoutCancel(ctx), prRef.owner, prRef.repo, c.ID); err != nil {
					return "", fmt.Errorf("delete duplicate reply %d on %s: %w", c.ID, prRef, err)
				}
				return commentRef(cs[0].ID), nil
			}
			return commentRef(c.ID), nil
		},
	})
	return err
}

// followUpReply is the answer to a follow-up: the commit it pushed, or
// why there is none.
func (p *Publisher) followUpReply(t task.Task, r task.Result, sha string, failure error) string {
	var b strings.Builder
	switch {
	case sha != "":
		fmt.Fprintf(&b, "Done: Wrench pushed %s to this pull request.\n\n", short(sha))
		if s := strings.TrimSpace(r.Summary); s != "" {
			b.WriteString(s)
			b.WriteString("\n\n")
		}
		if after := r.TestsAfter; after != nil && after.Command != "" {
			fmt.Fprintf(&b, "`%s` %s after the change.\n\n", tableCell(after.Command), testOutcome(after))
		} else {
			b.WriteString("There is no test command, so nothing checked this change.\n\n")
		}
	case failure != nil:
		fmt.Fprintf(&b, "Wrench made the change but could not push it: %s\n\n", failure)
		writePatch(&b, r.Patch)
	default:
		b.WriteString(plainOutcome(t, r))
		b.WriteString("\n\n")
		if r.Reason != "" {
			fmt.Fprintf(&b, "Status `%s`, reason: %s.\n\n", r.Status, oneLine(r.Reason))
		}
		writePatch(&b, r.Patch)
	}
	b.WriteString(p.taskLine(t, r))
	fmt.Fprintf(&b, "\n%s\n", marker(t.ID, markReply))
	return b.String()
}
