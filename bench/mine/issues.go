package mine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/wrenchworks/wrench/bench"
	"github.com/wrenchworks/wrench/github"
)

// IssueFinder finds the problem statement of a pull request: the title
// and body of the issue it links ("Fixes #12"). ok is false when it links
// none.
type IssueFinder interface {
	LinkedIssue(ctx context.Context, pr int) (text string, ok bool, err error)
}

// GitHubIssues finds linked issues through the GitHub API.
type GitHubIssues struct {
	Client      *github.Client
	Owner, Repo string
}

// closing matches GitHub's closing keywords followed by an issue of the
// same repository.
var closing = regexp.MustCompile(`(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+#(\d+)\b`)

// LinkedIssue reads the pull request, then the first issue its body
// closes.
func (g GitHubIssues) LinkedIssue(ctx context.Context, pr int) (string, bool, error) {
	p, err := g.Client.GetPullRequest(ctx, g.Owner, g.Repo, pr)
	if err != nil {
		return "", false, fmt.Errorf("pull request #%d: %w", pr, err)
	}
	m := closing.FindStringSubmatch(p.Title + "\n" + p.Body)
	if m == nil {
		return "", false, nil
	}
	n, _ := strconv.Atoi(m[1])
	is, err := g.Client.GetIssue(ctx, g.Owner, g.Repo, n)
	if errors.Is(err, github.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("issue #%d: %w", n, err)
	}
	return strings.TrimSpace(is.Title + "\n\n" + is.Body), true, nil
}

// problems replaces the problem statements of candidates whose pull
// request links an issue. A lookup that fails keeps the commit message.
func problems(ctx context.Context, cfg Config, cands []bench.Instance, prs map[string]int) {
	for i := range cands {
		pr, ok := prs[cands[i].Commit]
		if !ok {
			continue
		}
		text, ok, err := cfg.Issues.LinkedIssue(ctx, pr)
		if err != nil {
			cfg.Logger.Warn("linked issue", "commit", cands[i].Commit, "pr", pr, "err", err)
			continue
		}
		if ok && text != "" {
			cands[i].ProblemStatement, cands[i].ProblemSource = text, "issue"
		}
	}
}

var (
	squashPR = regexp.MustCompile(`\(#(\d+)\)\s*$`)
	mergePR  = regexp.MustCompile(`^Merge pull request #(\d+) from `)
)

// maxPRCommits bounds the walk along one merged branch.
const maxPRCommits = 500

// pullRequests maps commits to the pull request that brought them: a
// squash-merged commit's subject ends in "(#N)"; the commits of a branch
// merged by "Merge pull request #N from …" are those on its first-parent
// line down to the mainline.
func pullRequests(repo *git.Repository, head plumbing.Hash, merges []*object.Commit) map[string]int {
	out := map[string]int{}
	mainline := map[plumbing.Hash]bool{}
	for c, err := repo.CommitObject(head); err == nil; {
		mainline[c.Hash] = true
		subject, _, _ := strings.Cut(c.Message, "\n")
		if m := squashPR.FindStringSubmatch(subject); m != nil {
			n, _ := strconv.Atoi(m[1])
			out[c.Hash.String()] = n
		}
		if c.NumParents() == 0 {
			break
		}
		c, err = c.Parent(0)
	}
	for _, m := range merges {
		sub := mergePR.FindStringSubmatch(m.Message)
		if sub == nil || m.NumParents() < 2 {
			continue
		}
		n, _ := strconv.Atoi(sub[1])
		c, err := m.Parent(1)
		for i := 0; err == nil && i < maxPRCommits && !mainline[c.Hash]; i++ {
			if _, seen := out[c.Hash.String()]; !seen {
				out[c.Hash.String()] = n
			}
			if c.NumParents() == 0 {
				break
			}
			c, err = c.Parent(0)
		}
	}
	return out
}

// errNotExist makes go-git's missing-file error an fs.ErrNotExist.
func errNotExist(err error) error {
	if errors.Is(err, object.ErrFileNotFound) {
		return errors.Join(fs.ErrNotExist, err)
	}
	return err
}
