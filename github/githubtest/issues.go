package githubtest

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// restIssue is an issue the server holds, in GitHub's JSON shape (the
// fields Wrench reads).
type restIssue struct {
	ID      int64  `json:"id"`
	Number  int    `json:"number"`
	Title   string `json:"title"`
	Body    string `json:"body"`
	State   string `json:"state"`
	HTMLURL string `json:"html_url"`
	User    User   `json:"user"`
}

// AddIssue files an issue on owner/repo, as a user would, and returns its
// number (issues and pull requests share the numbering).
func (s *Server) AddIssue(owner, repo, title, body string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nextNumber(owner + "/" + repo)
	s.nextID++
	s.issues[fmt.Sprintf("%s/%s#%d", owner, repo, n)] = &restIssue{ID: s.nextID, Number: n, Title: title, Body: body, State: "open",
		HTMLURL: fmt.Sprintf("%s/%s/%s/issues/%d", s.URL(), owner, repo, n), User: User{Login: "reporter", Type: "User"}}
	return n
}

// AddMergedPullRequest records a merged pull request with body (e.g.
// "Fixes #12"), as if a person had opened and merged it, and returns its
// number.
func (s *Server) AddMergedPullRequest(owner, repo, title, body string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := owner + "/" + repo
	n := s.nextNumber(key)
	s.nextID++
	s.pulls[key] = append(s.pulls[key], &PullRequest{ID: s.nextID, Number: n, State: "closed", Title: title, Body: body,
		HTMLURL: fmt.Sprintf("%s/%s/%s/pull/%d", s.URL(), owner, repo, n),
		URL:     fmt.Sprintf("%s/repos/%s/%s/pulls/%d", s.APIURL(), owner, repo, n),
		User:    User{Login: "contributor", Type: "User"}, CreatedAt: time.Now().UTC()})
	return n
}

// nextNumber is the next issue or pull request number of key; s.mu held.
func (s *Server) nextNumber(key string) int {
	if s.nextPR[key] == 0 {
		s.nextPR[key] = 100
	}
	s.nextPR[key]++
	return s.nextPR[key]
}

// getIssue answers GET /repos/{o}/{r}/issues/{n}.
func (s *Server) getIssue(w http.ResponseWriter, owner, repo, num string) {
	s.mu.Lock()
	is, ok := s.issues[owner+"/"+repo+"#"+num]
	var out restIssue
	if ok {
		out = *is
	}
	s.mu.Unlock()
	if !ok {
		writeMessage(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// getPull answers GET /repos/{o}/{r}/pulls/{n}.
func (s *Server) getPull(w http.ResponseWriter, owner, repo, num string) {
	n, _ := strconv.Atoi(num)
	s.mu.Lock()
	var out *PullRequest
	for _, p := range s.pulls[owner+"/"+repo] {
		if p.Number == n {
			c := *p
			out = &c
		}
	}
	s.mu.Unlock()
	if out == nil {
		writeMessage(w, http.StatusNotFound, "Not Found")
		return
	}
	if sha, ok := s.resolve(owner, repo, "refs/heads/"+out.Head.Ref); ok && out.Head.Ref != "" {
		out.Head.SHA = sha // the branch's head now, as GitHub answers
	}
	writeJSON(w, http.StatusOK, out)
}
