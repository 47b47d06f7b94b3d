// Package githubtest is a stand-in GitHub for tests: a local HTTPS server
// that answers the REST endpoints Wrench uses the way GitHub does, records
// what it was sent, and serves its repositories over git's smart HTTP
// protocol through git's own http-backend (CGI), so clones and pushes are
// real.
//
// Layout mirrors GitHub Enterprise Server: the REST API is under
// APIURL() (".../api/v3"), repositories are at URL()/{owner}/{repo}.git,
// and web links (html_url) are under URL(). The API requires
// "Authorization: Bearer <token>" (or "token <token>"); git requires basic
// auth with the token as password, as GitHub does for installation tokens.
//
// REST endpoints answered:
//
//	POST /repos/{owner}/{repo}/pulls                      open a pull request (201; 422 like GitHub)
//	GET  /repos/{owner}/{repo}/pulls?head=&base=&state=   list pull requests
//	POST /repos/{owner}/{repo}/issues/{n}/comments        comment on an issue (201)
//	GET  /repos/{owner}/{repo}/issues/{n}/comments        list comments (per_page, page, Link)
//
// Faults can be injected per endpoint with [Server.Inject]. The server needs
// the git CLI and /usr/lib/git-core/git-http-backend; [New] skips the test
// when they are missing, except under CI=true, where it fails.
package githubtest

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// HTTPBackend is where git's smart HTTP CGI program is expected.
const HTTPBackend = "/usr/lib/git-core/git-http-backend"

// apiPrefix is where the REST API lives, as on GitHub Enterprise Server.
const apiPrefix = "/api/v3"

// Request is one REST request the server received. The Authorization
// header is not kept; Authorized says whether it carried the token.
type Request struct {
	Method     string
	Path       string // without the /api/v3 prefix
	Query      string
	Header     http.Header
	Body       []byte
	Authorized bool
}

// Fault makes the server answer matching requests with an error instead of
// serving them.
type Fault struct {
	// Method and Path select requests: a REST path without /api/v3
	// (e.g. "/repos/o/r/pulls") or a git path (e.g.
	// "/o/r.git/git-receive-pack", checked after authentication); an
	// empty Method matches any.
	Method, Path string
	// Status is the HTTP status to answer (e.g. 502, 403, 429).
	Status int
	// Message is the JSON "message" (e.g. "You have exceeded a secondary
	// rate limit..."), or the text of a git error.
	Message string
	// Header is added to the response (e.g. Retry-After).
	Header http.Header
	// Times is how many matching requests fail (1 when zero).
	Times int
	// Delay holds matching requests this long first (a slow network, or
	// a request sent late by a paused client); with Status zero they are
	// then served normally.
	Delay time.Duration
}

// Server is the stand-in GitHub. It is safe for concurrent use.
type Server struct {
	ts    *httptest.Server
	token string
	root  string
	git   http.Handler

	mu       sync.Mutex
	requests []Request
	faults   []*Fault
	pulls    map[string][]*PullRequest // by "owner/repo"
	comments map[string][]*Comment     // by "owner/repo#n"
	issues   map[string]*restIssue     // by "owner/repo#n"
	nextID   int64
	nextPR   map[string]int

	app      *App
	installs []*installation
	tokens   map[string]*instToken
	tokenTTL time.Duration
	issued   int
	labels   map[string][]string
	reviews  map[string][]*ReviewComment // by "owner/repo#n"
	perms    map[string]string           // role by "owner/repo/user", lower case
	created  int                         // comments created through the API
	deleted  int

	gitRequests atomic.Int64
	pushes      atomic.Int64
	hook        atomic.Pointer[func(Call)]
}

// Call is a request as [Server.SetHook] sees it.
type Call struct {
	Method string
	// Path is a REST path without /api/v3, or a git path
	// ("/o/r.git/git-receive-pack").
	Path string
	// Body is a REST request's body (nil for git).
	Body []byte
	Git  bool
}

// SetHook makes the server call fn with every authenticated request before
// serving it; fn may block (holding the request, as a slow network would)
// and runs on the request's goroutine. nil removes the hook.
func (s *Server) SetHook(fn func(Call)) {
	if fn == nil {
		s.hook.Store(nil)
		return
	}
	s.hook.Store(&fn)
}

func (s *Server) callHook(c Call) {
	if fn := s.hook.Load(); fn != nil {
		(*fn)(c)
	}
}

// TB is what the stand-in needs of its user: a *testing.T (any
// testing.TB), or a program's own, such as the fault suite's
// (internal/chaos), which runs the stand-in outside a test. It has more
// than five methods because it is the subset of testing.TB the stand-in
// calls, kept as testing.TB spells it so that a *testing.T fits as is.
type TB interface {
	Helper()
	Cleanup(func())
	TempDir() string
	Error(args ...any)
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Skipf(format string, args ...any)
}

// New starts a stand-in that accepts token, and closes it when t ends.
func New(t TB, token string) *Server {
	t.Helper()
	RequireGit(t)
	s := &Server{
		token:    token,
		root:     t.TempDir(),
		pulls:    map[string][]*PullRequest{},
		comments: map[string][]*Comment{},
		issues:   map[string]*restIssue{},
		nextPR:   map[string]int{},
		nextID:   1000,
		tokenTTL: time.Hour,
	}
	s.git = &cgi.Handler{
		Path: HTTPBackend,
		Env: []string{"GIT_PROJECT_ROOT=" + s.root, "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull},
		InheritEnv: []string{"PATH"},
		Stderr:     io.Discard,
	}
	s.ts = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.ts.Close)
	return s
}

// RequireGit skips t when the git CLI or git-http-backend is missing,
// except under CI=true, where it fails.
func RequireGit(t TB) {
	t.Helper()
	_, err := exec.LookPath("git")
	if err == nil {
		_, err = os.Stat(HTTPBackend)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("githubtest needs git and %s (required under CI=true): %v", HTTPBackend, err)
		}
		t.Skipf("githubtest needs git and %s: %v", HTTPBackend, err)
	}
}

// URL is the web base, e.g. "https://127.0.0.1:41234": repositories are
// cloned from URL()/owner/repo.git.
func (s *Server) URL() string { return s.ts.URL }

// APIURL is the REST API base (URL() + "/api/v3").
func (s *Server) APIURL() string { return s.ts.URL + apiPrefix }

// Client returns an HTTP client that trusts the server's certificate.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// CA returns the server's certificate as PEM, for clients (such as go-git)
// that take a CA bundle.
func (s *Server) CA() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.ts.Certificate().Raw})
}

// Requests returns the REST requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Pushes counts git receive-pack POSTs (pushes) that reached git.
func (s *Server) Pushes() int64 { return s.pushes.Load() }

// GitRequests counts authenticated git requests.
func (s *Server) GitRequests() int64 { return s.gitRequests.Load() }

// Inject adds a fault; faults are consumed in the order they were added.
func (s *Server) Inject(f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// serve routes a request to the REST API or to git.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if p, ok := strings.CutPrefix(r.URL.Path, apiPrefix+"/"); ok {
		s.serveAPI(w, r, "/"+p)
		return
	}
	s.serveGit(w, r)
}

// serveGit hands an authenticated request for an existing repository to
// git-http-backend.
func (s *Server) serveGit(w http.ResponseWriter, r *http.Request) {
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
	if len(parts) < 3 || !strings.HasSuffix(parts[1], ".git") || !validName(parts[0]) ||
		!validName(strings.TrimSuffix(parts[1], ".git")) {
		http.NotFound(w, r)
		return
	}
	_, pass, _ := r.BasicAuth()
	p := s.authenticate(pass)
	if !p.static && p.tok == nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
		http.Error(w, "Invalid username or token.", http.StatusUnauthorized)
		return
	}
	owner, name := parts[0], strings.TrimSuffix(parts[1], ".git")
	level := "read"
	if strings.HasSuffix(r.URL.Path, "/git-receive-pack") || r.URL.Query().Get("service") == "git-receive-pack" {
		level = "write"
	}
	ok, missing := p.can(owner, name, "contents", level)
	if _, err := os.Stat(s.repoDir(owner, name)); err != nil || (!ok && missing == "") {
		http.Error(w, "Repository not found.", http.StatusNotFound)
		return
	}
	if !ok {
		http.Error(w, fmt.Sprintf("Permission to %s/%s.git denied to wrench[bot].", owner, name), http.StatusForbidden)
		return
	}
	s.mu.Lock()
	fault := s.takeFault(r.Method, r.URL.Path)
	s.mu.Unlock()
	if fault != nil {
		for k, vs := range fault.Header {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		http.Error(w, fault.Message, fault.Status)
		return
	}
	s.callHook(Call{Method: r.Method, Path: r.URL.Path, Git: true})
	s.gitRequests.Add(1)
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
		s.pushes.Add(1)
	}
	s.git.ServeHTTP(w, r)
}

// serveAPI authenticates, records and answers one REST request.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, path string) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	p := s.authenticate(bearer(r.Header.Get("Authorization")))
	authorized := p.static || p.tok != nil || p.app
	h := r.Header.Clone()
	h.Del("Authorization")
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: path, Query: r.URL.RawQuery,
		Header: h, Body: body, Authorized: authorized})
	fault := s.takeFault(r.Method, path)
	s.mu.Unlock()

	w.Header().Set("X-GitHub-Api-Version-Selected", "2022-11-28")
	if authorized {
		s.callHook(Call{Method: r.Method, Path: path, Body: body})
	}
	if !authorized {
		writeMessage(w, http.StatusUnauthorized, "Bad credentials")
		return
	}
	if fault != nil && fault.Delay > 0 {
		time.Sleep(fault.Delay)
	}
	if fault != nil && fault.Status == 0 {
		fault = nil
	}
	if fault != nil {
		for k, vs := range fault.Header {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		msg := fault.Message
		if msg == "" {
			msg = http.StatusText(fault.Status)
		}
		writeMessage(w, fault.Status, msg)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if s.serveApp(w, r, path, p) {
		return
	}
	if p.app {
		writeMessage(w, http.StatusForbidden, "A JSON web token cannot be used on this endpoint; use an installation token")
		return
	}
	s.route(w, r, path, p)
}

// takeFault returns the first fault matching the request and consumes one
// of its times. s.mu must be held.
func (s *Server) takeFault(method, path string) *Fault {
	for i, f := range s.faults {
		if (f.Method == "" || f.Method == method) && f.Path == path {
			f.Times--
			if f.Times == 0 {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
			}
			return f
		}
	}
	return nil
}

// repoDir is where the bare repository owner/name lives.
func (s *Server) repoDir(owner, name string) string {
	return filepath.Join(s.root, owner, name+".git")
}

// validName accepts GitHub-like owner and repository names.
func validName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 100 {
		return false
	}
	for _, c := range s {
		if !(c == '-' || c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}
