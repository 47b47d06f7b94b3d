package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Pull request reviews and collaborators. Endpoints added:
//
//	GET    /repos/{owner}/{repo}/pulls/{n}/comments               its review comments
//	POST   /repos/{owner}/{repo}/pulls/{n}/comments/{id}/replies  answer a review thread
//	DELETE /repos/{owner}/{repo}/pulls/comments/{id}              delete a review comment
//	GET    /repos/{owner}/{repo}/collaborators/{user}/permission  a user's permission

// ReviewComment is a comment on a pull request's diff.
type ReviewComment struct {
	ID                int64     `json:"id"`
	Body              string    `json:"body"`
	Path              string    `json:"path"`
	Line              int       `json:"line,omitempty"`
	DiffHunk          string    `json:"diff_hunk"`
	InReplyToID       int64     `json:"in_reply_to_id,omitempty"`
	HTMLURL           string    `json:"html_url"`
	User              User      `json:"user"`
	AuthorAssociation string    `json:"author_association"`
	CreatedAt         time.Time `json:"created_at"`
}

// SetPermission gives user role on owner/repo ("admin", "maintain",
// "write", "triage", "read"); users without one have "none" (or "read"
// on a repository's collaborators list, as GitHub answers for public
// repositories).
func (s *Server) SetPermission(owner, repo, user, role string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perms == nil {
		s.perms = map[string]string{}
	}
	s.perms[strings.ToLower(owner+"/"+repo+"/"+user)] = role
}

// AddReviewComment adds a review comment by user on pull request n, as a
// reviewer would (inReplyTo: 0 starts a thread), and returns it.
func (s *Server) AddReviewComment(owner, repo string, n int, user, path string, line int, hunk, body string, inReplyTo int64) ReviewComment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.addReviewComment(owner, repo, n, User{Login: user, Type: "User"}, path, line, hunk, body, inReplyTo)
}

func (s *Server) addReviewComment(owner, repo string, n int, u User, path string, line int, hunk, body string, inReplyTo int64) *ReviewComment {
	s.nextID++
	c := &ReviewComment{ID: s.nextID, Body: body, Path: path, Line: line, DiffHunk: hunk, InReplyToID: inReplyTo, User: u,
		AuthorAssociation: "OWNER", CreatedAt: time.Now().UTC(),
		HTMLURL: fmt.Sprintf("%s/%s/%s/pull/%d#discussion_r%d", s.URL(), owner, repo, n, s.nextID)}
	if s.reviews == nil {
		s.reviews = map[string][]*ReviewComment{}
	}
	k := fmt.Sprintf("%s/%s#%d", owner, repo, n)
	s.reviews[k] = append(s.reviews[k], c)
	return c
}

// ReviewComments returns pull request n's review comments, oldest first.
func (s *Server) ReviewComments(owner, repo string, n int) []ReviewComment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ReviewComment
	for _, c := range s.reviews[fmt.Sprintf("%s/%s#%d", owner, repo, n)] {
		out = append(out, *c)
	}
	return out
}

// routeReview answers the review and collaborator endpoints; handled is
// false for other paths. p is the path after /repos/.
func (s *Server) routeReview(w http.ResponseWriter, r *http.Request, owner, repo string, p []string) bool {
	switch {
	case len(p) == 6 && p[3] == "pulls" && p[5] == "comments" && r.Method == http.MethodGet:
		n, _ := strconv.Atoi(p[4])
		out := s.ReviewComments(owner, repo, n)
		if out == nil {
			out = []ReviewComment{}
		}
		writeJSON(w, http.StatusOK, out)
	case len(p) == 8 && p[3] == "pulls" && p[5] == "comments" && p[7] == "replies" && r.Method == http.MethodPost:
		n, _ := strconv.Atoi(p[4])
		id, _ := strconv.ParseInt(p[6], 10, 64)
		s.reply(w, r, owner, repo, n, id)
	case len(p) == 6 && p[3] == "pulls" && p[4] == "comments" && r.Method == http.MethodDelete:
		id, _ := strconv.ParseInt(p[5], 10, 64)
		s.deleteReview(w, owner, repo, id)
	case len(p) == 6 && p[3] == "collaborators" && p[5] == "permission" && r.Method == http.MethodGet:
		s.mu.Lock()
		role, ok := s.perms[strings.ToLower(owner+"/"+repo+"/"+p[4])]
		s.mu.Unlock()
		if !ok {
			writeMessage(w, http.StatusNotFound, fmt.Sprintf("%s is not a user", p[4]))
			return true
		}
		perm := role
		switch role {
		case "maintain":
			perm = "write"
		case "triage":
			perm = "read"
		}
		writeJSON(w, http.StatusOK, map[string]any{"permission": perm, "role_name": role, "user": map[string]string{"login": p[4]}})
	default:
		return false
	}
	return true
}

func (s *Server) reply(w http.ResponseWriter, r *http.Request, owner, repo string, n int, id int64) {
	var in struct {
		Body string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
		write422(w, `{"resource":"PullRequestReviewComment","field":"body","code":"missing_field"}`)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var parent *ReviewComment
	for _, c := range s.reviews[fmt.Sprintf("%s/%s#%d", owner, repo, n)] {
		if c.ID == id {
			parent = c
		}
	}
	if parent == nil {
		writeMessage(w, http.StatusNotFound, "Not Found")
		return
	}
	root := parent.ID
	if parent.InReplyToID != 0 {
		root = parent.InReplyToID
	}
	c := s.addReviewComment(owner, repo, n, botUser, parent.Path, parent.Line, parent.DiffHunk, in.Body, root)
	s.created++
	writeJSON(w, http.StatusCreated, c)
}

func (s *Server) deleteReview(w http.ResponseWriter, owner, repo string, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, cs := range s.reviews {
		if !strings.HasPrefix(k, owner+"/"+repo+"#") {
			continue
		}
		for i, c := range cs {
			if c.ID == id {
				s.reviews[k] = append(cs[:i:i], cs[i+1:]...)
				s.deleted++
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
	}
	writeMessage(w, http.StatusNotFound, "Not Found")
}

// PullRequestReviewComment returns a "pull_request_review_comment" event
// payload, action "created", for comment c on pull request pr of repo.
func PullRequestReviewComment(repo Repo, pr PullRequest, c ReviewComment) []byte {
	comment := map[string]any{
		"id": c.ID, "body": c.Body, "path": c.Path, "line": c.Line, "diff_hunk": c.DiffHunk,
		"user": map[string]any{"login": c.User.Login, "type": orUser(c.User.Type)}, "author_association": c.AuthorAssociation,
		"html_url": c.HTMLURL, "created_at": c.CreatedAt.Format(time.RFC3339),
	}
	if c.InReplyToID != 0 {
		comment["in_reply_to_id"] = c.InReplyToID
	}
	return mustJSON(map[string]any{
		"action":       "created",
		"comment":      comment,
		"pull_request": pullJSON(repo, pr),
		"repository":   repoJSON(repo),
		"sender":       map[string]any{"login": c.User.Login, "type": orUser(c.User.Type)},
	})
}

func orUser(t string) string {
	if t == "" {
		return "User"
	}
	return t
}

func pullJSON(repo Repo, pr PullRequest) map[string]any {
	return map[string]any{
		"number": pr.Number, "title": pr.Title, "state": pr.State, "html_url": pr.HTMLURL, "body": pr.Body,
		"head": map[string]any{"ref": pr.Head.Ref, "sha": pr.Head.SHA, "label": pr.Head.Label, "repo": repoJSON(repo)},
		"base": map[string]any{"ref": pr.Base.Ref, "sha": pr.Base.SHA, "label": pr.Base.Label, "repo": repoJSON(repo)},
	}
}
