package githubtest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
)

// Sign returns the X-Hub-Signature-256 value GitHub sends for body.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Issue describes the issue a webhook payload is about.
type Issue struct {
	Number int
	Title  string
	Body   string
	// State is "open" (default) or "closed".
	State string
	// Author is the issue's author ("octocat" when empty).
	Author string
	// PullRequest marks the issue as a pull request's conversation.
	PullRequest bool
	// UpdatedAt is the issue's updated_at (a fixed time when empty);
	// labelling an issue changes it, so a test relabelling an issue sets
	// a new one.
	UpdatedAt string
}

// Actor is who caused an event: the commenter, or the sender of a label.
type Actor struct {
	Login string
	// Bot marks a bot account (type "Bot").
	Bot bool
	// Association is the comment's author_association (OWNER, MEMBER,
	// COLLABORATOR, CONTRIBUTOR, NONE, ...).
	Association string
}

// IssueLabeled returns an "issues" event payload, action "labeled", as
// GitHub sends when sender adds label to issue in repo.
func IssueLabeled(repo Repo, issue Issue, label string, sender Actor) []byte {
	return mustJSON(map[string]any{
		"action":     "labeled",
		"issue":      issueJSON(repo, issue, label),
		"label":      map[string]any{"id": 208045946, "name": label, "color": "f29513", "default": false},
		"repository": repoJSON(repo),
		"sender":     userJSON(sender),
	})
}

// IssueComment returns an "issue_comment" event payload with action (e.g.
// "created") for a comment by author on issue in repo. The comment's id is
// derived from the issue, author and body; use [IssueCommentWithID] for two
// identical comments.
func IssueComment(repo Repo, issue Issue, action string, author Actor, body string) []byte {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s#%d\x00%s\x00%s", repo.FullName(), issue.Number, author.Login, body)
	return IssueCommentWithID(repo, issue, 400000000+int64(h.Sum32()%100000000), action, author, body)
}

// IssueCommentWithID is [IssueComment] with the comment's id given.
func IssueCommentWithID(repo Repo, issue Issue, id int64, action string, author Actor, body string) []byte {
	assoc := author.Association
	if assoc == "" {
		assoc = "NONE"
	}
	return mustJSON(map[string]any{
		"action": action,
		"issue":  issueJSON(repo, issue, ""),
		"comment": map[string]any{
			"id":                 id,
			"html_url":           fmt.Sprintf("%s/issues/%d#issuecomment-%d", repo.HTMLURL, issue.Number, id),
			"user":               userJSON(author),
			"author_association": assoc,
			"body":               body,
			"created_at":         "2019-05-15T15:20:21Z",
		},
		"repository": repoJSON(repo),
		"sender":     userJSON(author),
	})
}

// Ping returns a "ping" event payload.
func Ping(repo Repo) []byte {
	return mustJSON(map[string]any{
		"zen":        "Keep it logically awesome.",
		"hook_id":    30,
		"hook":       map[string]any{"type": "Repository", "id": 30, "events": []string{"issues", "issue_comment"}},
		"repository": repoJSON(repo),
	})
}

func issueJSON(repo Repo, is Issue, label string) map[string]any {
	state := is.State
	if state == "" {
		state = "open"
	}
	author := is.Author
	if author == "" {
		author = "octocat"
	}
	labels := []any{}
	if label != "" {
		labels = append(labels, map[string]any{"name": label})
	}
	updated := is.UpdatedAt
	if updated == "" {
		updated = "2019-05-15T15:20:18Z"
	}
	m := map[string]any{
		"updated_at":         updated,
		"created_at":         "2019-05-15T15:19:00Z",
		"number":             is.Number,
		"title":              is.Title,
		"body":               is.Body,
		"state":              state,
		"labels":             labels,
		"user":               map[string]any{"login": author, "type": "User"},
		"html_url":           repo.HTMLURL + "/issues/" + itoa(is.Number),
		"author_association": "NONE",
	}
	if is.PullRequest {
		m["pull_request"] = map[string]any{"html_url": repo.HTMLURL + "/pull/" + itoa(is.Number)}
	}
	return m
}

func repoJSON(r Repo) map[string]any {
	return map[string]any{
		"id":             186853002,
		"name":           r.Name,
		"full_name":      r.FullName(),
		"private":        false,
		"owner":          map[string]any{"login": r.Owner, "type": "User"},
		"html_url":       r.HTMLURL,
		"clone_url":      r.CloneURL,
		"git_url":        "git://" + strings.TrimPrefix(r.CloneURL, "https://"),
		"ssh_url":        "git@example.com:" + r.FullName() + ".git",
		"default_branch": r.DefaultBranch,
	}
}

func userJSON(a Actor) map[string]any {
	typ := "User"
	if a.Bot {
		typ = "Bot"
	}
	login := a.Login
	if login == "" {
		login = "octocat"
	}
	return map[string]any{"login": login, "type": typ}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err)
	}
	return b
}
