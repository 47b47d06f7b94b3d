package github

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/wrenchworks/wrench/task"
)

// writeAssociations are the comment author_association values that may
// start a task: people with a stake in the repository. CONTRIBUTOR,
// FIRST_TIME_CONTRIBUTOR, FIRST_TIMER, MANNEQUIN and NONE may not.
var writeAssociations = map[string]bool{"OWNER": true, "MEMBER": true, "COLLABORATOR": true}

// eventPayload is the part of "issues" and "issue_comment" payloads the
// webhook reads.
type eventPayload struct {
	Action string `json:"action"`
	Issue  *struct {
		Number      int             `json:"number"`
		Title       string          `json:"title"`
		Body        string          `json:"body"`
		State       string          `json:"state"`
		UpdatedAt   string          `json:"updated_at"`
		PullRequest json.RawMessage `json:"pull_request"`
	} `json:"issue"`
	Label *struct {
		Name string `json:"name"`
	} `json:"label"`
	Comment *struct {
		ID                int64  `json:"id"`
		Body              string `json:"body"`
		AuthorAssociation string `json:"author_association"`
		User              struct {
			Login string `json:"login"`
			Type  string `json:"type"`
		} `json:"user"`
	} `json:"comment"`
	Repository *struct {
		Name          string `json:"name"`
		FullName      string `json:"full_name"`
		CloneURL      string `json:"clone_url"`
		DefaultBranch string `json:"default_branch"`
		Owner         struct {
			Login string `json:"login"`
		} `json:"owner"`
	} `json:"repository"`
	Sender *struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	} `json:"sender"`
}

// taskFor turns a verified delivery into a task, or nil and the reason it
// is ignored. An error means the payload is not what its event promises.
func (w *Webhook) taskFor(ctx context.Context, event, delivery string, data []byte) (*task.Task, string, error) {
	if event == "pull_request_review_comment" {
		return w.reviewCommentTask(ctx, delivery, data)
	}
	if event != "issues" && event != "issue_comment" {
		return nil, "event " + event + " does not start tasks", nil
	}
	var p eventPayload
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, "", fmt.Errorf("%s payload: %w", event, err)
	}
	if p.Issue == nil || p.Repository == nil || p.Issue.Number <= 0 || p.Repository.FullName == "" {
		return nil, "", fmt.Errorf("%s payload: issue and repository are required", event)
	}
	full := p.Repository.FullName
	if w.allowed != nil && !w.allowed[strings.ToLower(full)] {
		return nil, "repository " + full + " is not in the allowlist", nil
	}
	var comment, author, key string
	switch event {
	case "issues":
		if p.Action != "labeled" {
			return nil, "issues action " + p.Action + " does not start tasks", nil
		}
		if p.Label == nil || !strings.EqualFold(p.Label.Name, w.cfg.Label) {
			return nil, "label is not " + w.cfg.Label, nil
		}
		if p.Issue.State != "" && p.Issue.State != "open" {
			return nil, "issue is " + p.Issue.State, nil
		}
		if p.Issue.UpdatedAt == "" {
			return nil, "", errors.New("issues payload: issue.updated_at is required")
		}
		// Labelling updates the issue, so updated_at tells one labelling
		// from the next.
		key = "labeled\x00" + p.Issue.UpdatedAt + "\x00" + strings.ToLower(p.Label.Name)
	case "issue_comment":
		if p.Action != "created" {
			return nil, "issue_comment action " + p.Action + " does not start tasks", nil
		}
		if p.Comment == nil {
			return nil, "", errors.New("issue_comment payload: comment is required")
		}
		rest, ok := cutCommand(p.Comment.Body, w.cfg.CommandPrefix)
		if !ok {
			return nil, "comment does not start with " + w.cfg.CommandPrefix, nil
		}
		u := p.Comment.User
		if u.Type == "Bot" || strings.HasSuffix(u.Login, "[bot]") {
			return nil, "comment is by a bot (" + u.Login + ")", nil
		}
		if len(p.Issue.PullRequest) > 0 && string(p.Issue.PullRequest) != "null" {
			if p.Comment.ID <= 0 {
				return nil, "", errors.New("issue_comment payload: comment.id is required")
			}
			return w.prConversationTask(ctx, delivery, p, rest)
		}
		if !writeAssociations[p.Comment.AuthorAssociation] {
			return nil, fmt.Sprintf("comment author %s is %s, not an owner, member or collaborator",
				u.Login, p.Comment.AuthorAssociation), nil
		}
		if p.Comment.ID <= 0 {
			return nil, "", errors.New("issue_comment payload: comment.id is required")
		}
		comment, author = rest, u.Login
		key = "comment\x00" + strconv.FormatInt(p.Comment.ID, 10)
	}
	if len(p.Issue.PullRequest) > 0 && string(p.Issue.PullRequest) != "null" {
		return nil, "pull request conversations do not start tasks", nil
	}
	owner, name, ok := splitFullName(full)
	if !ok {
		return nil, "", fmt.Errorf("%s payload: repository full_name %q is not owner/repo", event, full)
	}
	if err := w.checkCloneURL(p.Repository.CloneURL, full); err != nil {
		return nil, "", fmt.Errorf("%s payload: %w", event, err)
	}
	branch := p.Repository.DefaultBranch
	if branch == "" {
		return nil, "", fmt.Errorf("%s payload: repository default_branch is required", event)
	}
	t := &task.Task{
		ID:          taskID(owner, name, p.Issue.Number, key),
		Repo:        task.Repo{URL: p.Repository.CloneURL, Ref: branch},
		Instruction: instruction(p.Issue.Title, p.Issue.Body, author, comment),
		Limits:      w.cfg.Limits,
		Output:      task.Output{PullRequest: &task.PullRequest{Base: branch}},
		Source: task.Source{Kind: "github", Delivery: delivery,
			Issue: fmt.Sprintf("%s/%s#%d", owner, name, p.Issue.Number)},
	}
	if w.cfg.TestCommand != nil {
		t.TestCommand = w.cfg.TestCommand(full)
	}
	return t, "", nil
}

// checkCloneURL accepts only WebURL/owner/repo.git over https, without
// credentials, query or fragment.
func (w *Webhook) checkCloneURL(raw, full string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("repository clone_url %q: %w", raw, err)
	}
	want := strings.TrimSuffix(w.web.Path, "/") + "/" + full + ".git"
	if u.Scheme != "https" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
		!strings.EqualFold(u.Host, w.web.Host) || !strings.EqualFold(u.Path, want) {
		return fmt.Errorf("repository clone_url %q is not %s://%s%s", raw, w.web.Scheme, w.web.Host, want)
	}
	return nil
}

// cutCommand returns what follows prefix when body's first word (after
// leading space) is exactly prefix.
func cutCommand(body, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimLeftFunc(body, unicode.IsSpace), prefix)
	if !ok {
		return "", false
	}
	if r, _ := utf8.DecodeRuneInString(rest); rest != "" && !unicode.IsSpace(r) {
		return "", false
	}
	return strings.TrimSpace(rest), true
}

// taskID derives a task id from the issue and key, which identifies the
// triggering action from signed content (the comment's id, or the
// labelled issue's updated_at): a redelivery, or a replay of a captured
// delivery under a forged X-GitHub-Delivery header (which the signature
// does not cover), gives the same id, and the queue drops it as a
// duplicate; a new /wrench comment or a new labelling is a new task. Ids
// fit task's 64-character pattern.
func taskID(owner, repo string, number int, key string) string {
	sum := sha256.Sum256([]byte(key))
	return "gh-" + idPart(owner, 16) + "-" + idPart(repo, 20) + "-" + strconv.Itoa(number) + "-" + hex.EncodeToString(sum[:6])
}

// idPart keeps letters, digits, '-' and '_' of s (others become '-'), at
// most n of them.
func idPart(s string, n int) string {
	var b strings.Builder
	for _, c := range s {
		if b.Len() == n {
			break
		}
		switch {
		case c < utf8.RuneSelf && (unicode.IsLetter(c) || unicode.IsDigit(c) || c == '-' || c == '_'):
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
	}
	if b.Len() == 0 {
		return "x"
	}
	return b.String()
}

// Instruction parts are cut so the whole stays under the task limit.
const (
	maxTitle   = 512
	maxBody    = 40 << 10
	maxComment = 16 << 10
)

// instruction is the issue's title (its first line, which the publisher
// uses as the pull request's title), its body, and the comment that asked
// for the work, if any.
func instruction(title, body, author, comment string) string {
	var b strings.Builder
	b.WriteString(clip(strings.Join(strings.Fields(title), " "), maxTitle))
	if s := strings.TrimSpace(body); s != "" {
		b.WriteString("\n\n")
		b.WriteString(clip(s, maxBody))
	}
	if comment != "" {
		fmt.Fprintf(&b, "\n\nRequest from @%s in a comment on the issue:\n\n%s", author, clip(comment, maxComment))
	}
	return b.String()
}

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "\n[… truncated]"
}

// ownerName and repoName are the names GitHub allows: an owner of letters,
// digits and inner hyphens; a repository of letters, digits, '.', '-' and
// '_' that is not "." or "..".
var (
	ownerName = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
	repoName  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
)

// splitFullName splits "owner/repo", refusing names GitHub would not give
// (a payload's "../.." used to be accepted).
func splitFullName(full string) (owner, name string, ok bool) {
	owner, name, ok = strings.Cut(full, "/")
	if !ok || !ownerName.MatchString(owner) || !repoName.MatchString(name) || name == "." || name == ".." {
		return "", "", false
	}
	return owner, name, true
}
