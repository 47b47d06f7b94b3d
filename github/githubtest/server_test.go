package githubtest_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/github/githubtest"
)

const token = "ghs_standinTOKEN"

func call(t *testing.T, s *githubtest.Server, method, path, tok string, body any) (int, map[string]any) {
	t.Helper()
	var rd bytes.Buffer
	if body != nil {
		_ = json.NewEncoder(&rd).Encode(body)
	}
	req, _ := http.NewRequest(method, s.APIURL()+path, &rd)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestPullRequestsLikeGitHub(t *testing.T) {
	s := githubtest.New(t, token)
	s.AddRepo(t, "o", "r", map[string]string{"a.txt": "a\n"})
	s.Commit(t, "o", "r", "feature", map[string]string{"a.txt": "b\n"}, "change a")
	s.Git(t, "o", "r", "branch", "level", "main")

	cases := []struct {
		name string
		tok  string
		pr   map[string]any
		code int
	}{
		{"no token", "", map[string]any{"title": "t", "head": "feature", "base": "main"}, 401},
		{"missing head", token, map[string]any{"title": "t", "head": "nope", "base": "main"}, 422},
		{"missing base", token, map[string]any{"title": "t", "head": "feature", "base": "nope"}, 422},
		{"no commits between", token, map[string]any{"title": "t", "head": "level", "base": "main"}, 422},
		{"opened", token, map[string]any{"title": "t", "head": "o:feature", "base": "main"}, 201},
		{"already exists", token, map[string]any{"title": "t2", "head": "feature", "base": "main"}, 422},
	}
	for _, c := range cases {
		if code, out := call(t, s, "POST", "/repos/o/r/pulls", c.tok, c.pr); code != c.code {
			t.Errorf("%s: %d %v, want %d", c.name, code, out, c.code)
		}
	}
	if n := len(s.PullRequests("o", "r")); n != 1 {
		t.Errorf("%d pull requests, want 1", n)
	}
	if code, _ := call(t, s, "GET", "/repos/nobody/r/pulls", token, nil); code != 404 {
		t.Errorf("unknown repository: %d", code)
	}
	if got := len(s.Requests()); got != 7 {
		t.Errorf("%d requests recorded, want 7", got)
	}
}

func TestGitNeedsTheToken(t *testing.T) {
	s := githubtest.New(t, token)
	repo := s.AddRepo(t, "o", "r", map[string]string{"a.txt": "a\n"})
	clone := func(user string) error {
		ca := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(ca, s.CA(), 0o600); err != nil {
			t.Fatal(err)
		}
		u := strings.Replace(repo.CloneURL, "https://", "https://"+user+"@", 1)
		cmd := exec.Command("git", "clone", "-q", u, filepath.Join(t.TempDir(), "c"))
		cmd.Env = append(os.Environ(), "GIT_SSL_CAINFO="+ca, "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("git clone as %s: %s", user[:strings.Index(user, ":")], out)
		}
		return err
	}
	if err := clone("x-access-token:" + token); err != nil {
		t.Errorf("clone with the token: %v", err)
	}
	if err := clone("x-access-token:wrong"); err == nil {
		t.Error("clone with a wrong token succeeded")
	}
	if s.GitRequests() == 0 {
		t.Error("no git request counted")
	}
}
