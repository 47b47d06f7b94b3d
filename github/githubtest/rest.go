package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// PullRequest is a pull request the server holds, in GitHub's JSON shape
// (the fields Wrench uses).
type PullRequest struct {
	ID                  int64     `json:"id"`
	Number              int       `json:"number"`
	State               string    `json:"state"`
	Title               string    `json:"title"`
	Body                string    `json:"body"`
	Draft               bool      `json:"draft"`
	MaintainerCanModify bool      `json:"maintainer_can_modify"`
	HTMLURL             string    `json:"html_url"`
	URL                 string    `json:"url"`
	Head                Ref       `json:"head"`
	Base                Ref       `json:"base"`
	User                User      `json:"user"`
	CreatedAt           time.Time `json:"created_at"`
}

// Ref is a pull request's head or base.
type Ref struct {
	Label string   `json:"label"`
	Ref   string   `json:"ref"`
	SHA   string   `json:"sha"`
	Repo  *RepoRef `json:"repo,omitempty"`
}

// RepoRef names the repository of a head or base.
type RepoRef struct {
	FullName string `json:"full_name"`
}

// User is a GitHub account.
type User struct {
	Login string `json:"login"`
	Type  string `json:"type"`
}

// Comment is an issue comment the server holds.
type Comment struct {
	ID        int64     `json:"id"`
	Body      string    `json:"body"`
	HTMLURL   string    `json:"html_url"`
	User      User      `json:"user"`
	CreatedAt time.Time `json:"created_at"`
}

// botUser is who the server says created pull requests and comments.
var botUser = User{Login: "wrench[bot]", Type: "Bot"}

// PullRequests returns the pull requests of owner/repo, oldest first.
func (s *Server) PullRequests(owner, repo string) []PullRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []PullRequest
	for _, p := range s.pulls[owner+"/"+repo] {
		out = append(out, *p)
	}
	return out
}

// Comments returns the comments on issue owner/repo#number, oldest first.
func (s *Server) Comments(owner, repo string, number int) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Comment
	for _, c := range s.comments[fmt.Sprintf("%s/%s#%d", owner, repo, number)] {
		out = append(out, *c)
	}
	return out
}

// AddComment adds a comment as user (e.g. to test pagination or markers).
func (s *Server) AddComment(owner, repo string, number int, user, body string) Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.addComment(owner, repo, number, User{Login: user, Type: "User"}, body)
}

func (s *Server) addComment(owner, repo string, number int, u User, body string) *Comment {
	s.nextID++
	c := &Comment{ID: s.nextID, Body: body, User: u, CreatedAt: time.Now().UTC(),
		HTMLURL: fmt.Sprintf("%s/%s/%s/issues/%d#issuecomment-%d", s.URL(), owner, repo, number, s.nextID)}
	k := fmt.Sprintf("%s/%s#%d", owner, repo, number)
	s.comments[k] = append(s.comments[k], c)
	return c
}

// route answers an authorized REST request.
func (s *Server) route(w http.ResponseWriter, r *http.Request, path string, pr principal) {
	p := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(p) < 4 || p[0] != "repos" {
		writeMessage(w, http.StatusNotFound, "Not Found")
		return
	}
	owner, repo := p[1], p[2]
	if !validName(owner) || !validName(repo) || !s.repoExists(owner, repo) {
		writeMessage(w, http.StatusNotFound, "Not Found")
		return
	}
	if perm := permissionFor(r.Method, p[3:]); perm != "" {
		level := "read"
		if r.Method != http.MethodGet {
			level = "write"
		}
		if ok, missing := pr.can(owner, repo, perm, level); !ok {
			if missing == "" {
				writeMessage(w, http.StatusNotFound, "Not Found")
			} else {
				forbidden(w, missing)
			}
			return
		}
	}
	if s.routeReview(w, r, owner, repo, p) {
		return
	}
	switch {
	case len(p) == 4 && p[3] == "pulls" && r.Method == http.MethodPost:
		s.createPull(w, r, owner, repo)
	case len(p) == 4 && p[3] == "pulls" && r.Method == http.MethodGet:
		s.listPulls(w, r, owner, repo)
	case len(p) == 5 && p[3] == "issues" && r.Method == http.MethodGet:
		s.getIssue(w, owner, repo, p[4])
	case len(p) == 5 && p[3] == "pulls" && r.Method == http.MethodGet:
		s.getPull(w, owner, repo, p[4])
	case len(p) == 6 && p[3] == "issues" && p[4] == "comments" && r.Method == http.MethodDelete:
		id, _ := strconv.ParseInt(p[5], 10, 64)
		s.deleteComment(w, owner, repo, id)
	case len(p) == 6 && p[3] == "issues" && p[5] == "labels" && r.Method == http.MethodPost:
		n, err := strconv.Atoi(p[4])
		if err != nil || n <= 0 {
			writeMessage(w, http.StatusNotFound, "Not Found")
			return
		}
		s.addLabels(w, r, owner, repo, n)
	case len(p) == 6 && p[3] == "issues" && p[5] == "comments":
		n, err := strconv.Atoi(p[4])
		if err != nil || n <= 0 {
			writeMessage(w, http.StatusNotFound, "Not Found")
			return
		}
		switch r.Method {
		case http.MethodPost:
			s.createComment(w, r, owner, repo, n)
		case http.MethodGet:
			s.listComments(w, r, owner, repo, n)
		default:
			writeMessage(w, http.StatusNotFound, "Not Found")
		}
	default:
		writeMessage(w, http.StatusNotFound, "Not Found")
	}
}

// permissionFor names the App permission a repository endpoint needs
// (rest is the path after /repos/{owner}/{repo}).
func permissionFor(method string, rest []string) string {
	switch {
	case len(rest) >= 1 && rest[0] == "pulls":
		return "pull_requests"
	case len(rest) >= 1 && rest[0] == "issues":
		return "issues"
	}
	// collaborators/{user}/permission and the rest need metadata.
	return "metadata"
}

// validationError is GitHub's 422 body.
type validationError struct {
	Message string            `json:"message"`
	Errors  []json.RawMessage `json:"errors,omitempty"`
	DocURL  string            `json:"documentation_url"`
}

func write422(w http.ResponseWriter, errs ...string) {
	v := validationError{Message: "Validation Failed", DocURL: "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"}
	for _, e := range errs {
		v.Errors = append(v.Errors, json.RawMessage(e))
	}
	writeJSON(w, http.StatusUnprocessableEntity, v)
}

func (s *Server) createPull(w http.ResponseWriter, r *http.Request, owner, repo string) {
	var in struct {
		Title               string `json:"title"`
		Head                string `json:"head"`
		Base                string `json:"base"`
		Body                string `json:"body"`
		Draft               bool   `json:"draft"`
		MaintainerCanModify *bool  `json:"maintainer_can_modify"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeMessage(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if in.Title == "" || in.Head == "" || in.Base == "" {
		write422(w, `{"resource":"PullRequest","field":"title","code":"missing_field"}`)
		return
	}
	head := in.Head
	if o, b, ok := strings.Cut(in.Head, ":"); ok {
		if !strings.EqualFold(o, owner) {
			write422(w, `{"resource":"PullRequest","field":"head","code":"invalid"}`)
			return
		}
		head = b
	}
	headSHA, ok := s.resolve(owner, repo, "refs/heads/"+head)
	if !ok {
		write422(w, `{"resource":"PullRequest","field":"head","code":"invalid"}`)
		return
	}
	baseSHA, ok := s.resolve(owner, repo, "refs/heads/"+in.Base)
	if !ok {
		write422(w, `{"resource":"PullRequest","field":"base","code":"invalid"}`)
		return
	}
	if s.ahead(owner, repo, baseSHA, headSHA) == 0 {
		write422(w, fmt.Sprintf(`{"resource":"PullRequest","code":"custom","message":"No commits between %s and %s"}`, in.Base, head))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := owner + "/" + repo
	for _, p := range s.pulls[key] {
		if p.State == "open" && p.Head.Ref == head && p.Base.Ref == in.Base {
			write422(w, fmt.Sprintf(`{"resource":"PullRequest","code":"custom","message":"A pull request already exists for %s:%s."}`, owner, head))
			return
		}
	}
	n := s.nextNumber(key)
	s.nextID++
	pr := &PullRequest{
		ID: s.nextID, Number: n, State: "open", Title: in.Title, Body: in.Body, Draft: in.Draft,
		MaintainerCanModify: in.MaintainerCanModify == nil || *in.MaintainerCanModify,
		HTMLURL:             fmt.Sprintf("%s/%s/%s/pull/%d", s.URL(), owner, repo, n),
		URL:                 fmt.Sprintf("%s/repos/%s/%s/pulls/%d", s.APIURL(), owner, repo, n),
		Head:                Ref{Label: owner + ":" + head, Ref: head, SHA: headSHA, Repo: &RepoRef{FullName: owner + "/" + repo}},
		Base:                Ref{Label: owner + ":" + in.Base, Ref: in.Base, SHA: baseSHA, Repo: &RepoRef{FullName: owner + "/" + repo}},
		User:                botUser, CreatedAt: time.Now().UTC(),
	}
	s.pulls[key] = append(s.pulls[key], pr)
	writeJSON(w, http.StatusCreated, pr)
}

func (s *Server) listPulls(w http.ResponseWriter, r *http.Request, owner, repo string) {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []*PullRequest{}
	for _, p := range s.pulls[owner+"/"+repo] {
		if state != "all" && p.State != state {
			continue
		}
		if h := q.Get("head"); h != "" && !strings.EqualFold(h, p.Head.Label) {
			continue
		}
		if b := q.Get("base"); b != "" && b != p.Base.Ref {
			continue
		}
		out = append(out, p)
	}
	// GitHub's default sort is by creation, newest first.
	sort.SliceStable(out, func(i, j int) bool { return out[i].Number > out[j].Number })
	writeJSON(w, http.StatusOK, out)
}

// ClosePullRequest marks a pull request closed, as a maintainer would.
func (s *Server) ClosePullRequest(owner, repo string, number int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pulls[owner+"/"+repo] {
		if p.Number == number {
			p.State = "closed"
		}
	}
}

// deleteComment answers DELETE /repos/{owner}/{repo}/issues/comments/{id}.
func (s *Server) deleteComment(w http.ResponseWriter, owner, repo string, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, cs := range s.comments {
		if !strings.HasPrefix(k, owner+"/"+repo+"#") {
			continue
		}
		for i, c := range cs {
			if c.ID == id {
				s.comments[k] = append(cs[:i:i], cs[i+1:]...)
				s.deleted++
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
	}
	writeMessage(w, http.StatusNotFound, "Not Found")
}

// addLabels answers POST /repos/{owner}/{repo}/issues/{n}/labels.
func (s *Server) addLabels(w http.ResponseWriter, r *http.Request, owner, repo string, n int) {
	var in struct {
		Labels []string `json:"labels"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || len(in.Labels) == 0 {
		write422(w, `{"resource":"Label","field":"labels","code":"missing_field"}`)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := fmt.Sprintf("%s/%s#%d", owner, repo, n)
	if s.labels == nil {
		s.labels = map[string][]string{}
	}
	for _, l := range in.Labels {
		if !slices.Contains(s.labels[k], l) {
			s.labels[k] = append(s.labels[k], l)
		}
	}
	out := []map[string]string{}
	for _, l := range s.labels[k] {
		out = append(out, map[string]string{"name": l})
	}
	writeJSON(w, http.StatusOK, out)
}

// Labels returns the labels of issue or pull request owner/repo#n.
func (s *Server) Labels(owner, repo string, n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.labels[fmt.Sprintf("%s/%s#%d", owner, repo, n)]...)
}

// CommentsCreated counts comments created through the API, including
// those deleted since; CommentsDeleted counts the deleted ones.
func (s *Server) CommentsCreated() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.created
}

// CommentsDeleted counts comments deleted through the API.
func (s *Server) CommentsDeleted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleted
}

func (s *Server) createComment(w http.ResponseWriter, r *http.Request, owner, repo string, n int) {
	var in struct {
		Body string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeMessage(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if in.Body == "" {
		write422(w, `{"resource":"IssueComment","field":"body","code":"missing_field"}`)
		return
	}
	if len([]rune(in.Body)) > 65536 {
		write422(w, `{"resource":"IssueComment","code":"custom","field":"body","message":"body is too long (maximum is 65536 characters)"}`)
		return
	}
	s.mu.Lock()
	c := s.addComment(owner, repo, n, botUser, in.Body)
	s.created++
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, c)
}

func (s *Server) listComments(w http.ResponseWriter, r *http.Request, owner, repo string, n int) {
	perPage, page := 30, 1
	if v, err := strconv.Atoi(r.URL.Query().Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	if v, err := strconv.Atoi(r.URL.Query().Get("page")); err == nil && v > 0 {
		page = v
	}
	s.mu.Lock()
	all := s.comments[fmt.Sprintf("%s/%s#%d", owner, repo, n)]
	out := []Comment{}
	for i := (page - 1) * perPage; i < len(all) && i < page*perPage; i++ {
		out = append(out, *all[i])
	}
	more := page*perPage < len(all)
	s.mu.Unlock()
	if more {
		next := *r.URL
		next.Scheme, next.Host = "https", r.Host
		q := url.Values{"per_page": {strconv.Itoa(perPage)}, "page": {strconv.Itoa(page + 1)}}
		next.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, next.String()))
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeMessage(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"message": msg, "documentation_url": "https://docs.github.com/rest"})
}
