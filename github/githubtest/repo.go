package githubtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Repo is a repository the server hosts.
type Repo struct {
	Owner, Name   string
	DefaultBranch string
	// CloneURL is the https URL to clone (no credentials).
	CloneURL string
	// HTMLURL is the repository's web page.
	HTMLURL string
	// Dir is the bare repository on disk.
	Dir string
	// Head is the default branch's commit when the repository was added.
	Head string
}

// FullName is "owner/name".
func (r Repo) FullName() string { return r.Owner + "/" + r.Name }

// AddRepo creates owner/name with one commit of files on branch main and
// returns it.
func (s *Server) AddRepo(t TB, owner, name string, files map[string]string) Repo {
	t.Helper()
	if !validName(owner) || !validName(name) {
		t.Fatalf("githubtest: bad repository name %s/%s", owner, name)
	}
	dir := s.repoDir(owner, name)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	runGit(t, "", "init", "-q", "--bare", "-b", "main", dir)
	runGit(t, dir, "config", "http.receivepack", "true")
	head := s.Commit(t, owner, name, "main", files, "initial commit")
	return Repo{Owner: owner, Name: name, DefaultBranch: "main", Dir: dir, Head: head,
		CloneURL: s.URL() + "/" + owner + "/" + name + ".git", HTMLURL: s.URL() + "/" + owner + "/" + name}
}

// Commit adds a commit to branch of owner/name that writes files (an empty
// content deletes the file) and returns its sha, as a push by someone else
// would.
func (s *Server) Commit(t TB, owner, name, branch string, files map[string]string, msg string) string {
	t.Helper()
	bare := s.repoDir(owner, name)
	work := t.TempDir()
	runGit(t, work, "init", "-q", "-b", branch)
	if sha, ok := s.resolve(owner, name, "refs/heads/"+branch); ok {
		runGit(t, work, "fetch", "-q", bare, "refs/heads/"+branch)
		runGit(t, work, "reset", "-q", "--hard", sha)
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		full := filepath.Join(work, filepath.FromSlash(p))
		if files[p] == "" {
			runGit(t, work, "rm", "-q", "--ignore-unmatch", p)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(files[p]), 0o644); err != nil {
			t.Fatal(err)
		}
		runGit(t, work, "add", p)
	}
	runGit(t, work, "commit", "-q", "--allow-empty", "-m", msg)
	runGit(t, work, "push", "-q", bare, "HEAD:refs/heads/"+branch)
	return strings.TrimSpace(runGit(t, work, "rev-parse", "HEAD"))
}

// Branch returns the commit branch points at in owner/name.
func (s *Server) Branch(owner, name, branch string) (sha string, ok bool) {
	return s.resolve(owner, name, "refs/heads/"+branch)
}

// File returns path's content at rev (a branch or sha) in owner/name.
func (s *Server) File(t TB, owner, name, rev, path string) string {
	t.Helper()
	return runGit(t, s.repoDir(owner, name), "show", rev+":"+path)
}

// Git runs git in owner/name's bare repository and returns its stdout.
func (s *Server) Git(t TB, owner, name string, args ...string) string {
	t.Helper()
	return runGit(t, s.repoDir(owner, name), args...)
}

func (s *Server) repoExists(owner, name string) bool {
	_, err := os.Stat(s.repoDir(owner, name))
	return err == nil
}

// resolve returns the sha ref points at.
func (s *Server) resolve(owner, name, ref string) (string, bool) {
	out, err := gitOutput(s.repoDir(owner, name), "rev-parse", "--verify", "-q", ref+"^{commit}")
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(out), true
}

// ahead counts the commits of head that base lacks.
func (s *Server) ahead(owner, name, base, head string) int {
	out, err := gitOutput(s.repoDir(owner, name), "rev-list", "--count", base+".."+head)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(out))
	return n
}

// gitEnv isolates git from the host's configuration.
func gitEnv() []string {
	return append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_AUTHOR_NAME=Someone", "GIT_AUTHOR_EMAIL=someone@example.com",
		"GIT_COMMITTER_NAME=Someone", "GIT_COMMITTER_EMAIL=someone@example.com")
}

func gitOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	out, err := cmd.Output()
	return string(out), err
}

func runGit(t TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
