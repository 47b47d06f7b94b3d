package environment_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/environment"
	"github.com/wrenchworks/wrench/github/githubtest"
	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/repoconfig"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker"
	"github.com/wrenchworks/wrench/sandbox/docker/dockertest"
	"github.com/wrenchworks/wrench/task"
	"github.com/wrenchworks/wrench/workspace"
)

var denv dockertest.Env

func TestMain(m *testing.M) {
	code := m.Run()
	denv.Cleanup()
	os.Exit(code)
}

// rig is a builder on the real engine with the product's sandbox image,
// a workspace manager with mirrors, and a repository of our own.
type rig struct {
	t       testing.TB
	p       *docker.Provider
	b       *environment.Builder
	store   *environment.Store
	m       *workspace.Manager
	repo    string
	deploy  string
	created []string // snapshot images to remove
	// extraEnv is added to the environment of every later prepare (a
	// different environment is a different key).
	extraEnv map[string]string
}

// newRig returns a rig; mods change the builder's configuration.
func newRig(t testing.TB, mods ...func(*environment.Config)) *rig {
	t.Helper()
	cli, shim, _ := denv.Setup(t)
	ctx := context.Background()
	if _, err := cli.ImageInspect(ctx, dockertest.DefaultImage); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s missing (make image): %v", dockertest.DefaultImage, err)
		}
		t.Skipf("%s missing (make image)", dockertest.DefaultImage)
	}
	r := &rig{t: t, deploy: dockertest.Deployment(t)}
	var err error
	r.p, err = docker.New(ctx, docker.Config{Engine: docker.NewEngine(cli), ShimPath: shim, Deployment: r.deploy, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	r.m, err = workspace.NewManager(workspace.Config{Root: filepath.Join(base, "ws"), MirrorDir: filepath.Join(base, "mirrors"), Deployment: r.deploy})
	if err != nil {
		t.Fatal(err)
	}
	r.store, err = environment.NewStore(r.p, filepath.Join(base, "env"), r.deploy)
	if err != nil {
		t.Fatal(err)
	}
	cfg := environment.Config{Sandboxes: r.p, Images: r.p, Snapshots: r.p, Store: r.store}
	for _, mod := range mods {
		mod(&cfg)
	}
	r.b, err = environment.NewBuilder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.repo = filepath.Join(base, "src")
	if err := os.MkdirAll(r.repo, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if left := dockertest.Containers(t, cli, r.deploy); len(left) > 0 {
			t.Errorf("%d containers left behind", len(left))
			dockertest.RemoveAll(t, cli, r.deploy)
		}
		snaps, _ := r.store.List(context.Background())
		for _, s := range snaps {
			r.p.RemoveImage(context.Background(), s.ImageID)
		}
		r.p.Close()
	})
	return r
}

func (r *rig) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.repo
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (r *rig) write(rel, content string) {
	r.t.Helper()
	p := filepath.Join(r.repo, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) commit(msg string) string {
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// prepare resolves the repository's main branch, reads its .wrench.yaml
// through the default policy and prepares a sandbox.
func (r *rig) prepare(taskID string, secrets map[string]string) (*environment.Prepared, *[]task.Event, error) {
	r.t.Helper()
	ctx := context.Background()
	src, err := r.m.Resolve(ctx, task.Repo{URL: r.repo, Ref: "main"}, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	defer src.Close()
	var file *repoconfig.File
	if data, err := src.ReadFile(repoconfig.FileName, repoconfig.MaxFileBytes); err == nil {
		if file, err = repoconfig.Parse(data); err != nil {
			r.t.Fatal(err)
		}
	}
	tk := task.Task{ID: taskID, Repo: task.Repo{URL: r.repo}, Instruction: "x"}
	eff, err := policy.Default(policy.Options{Loopback: true}).Resolve(tk, file)
	if err != nil {
		r.t.Fatal(err)
	}
	eff.SecretNames = nil
	for k, v := range r.extraEnv {
		if eff.Env == nil {
			eff.Env = map[string]string{}
		}
		eff.Env[k] = v
	}
	for k := range secrets {
		eff.SecretNames = append(eff.SecretNames, k)
	}
	var events []task.Event
	p, err := r.b.Prepare(ctx, environment.Request{
		TaskID: taskID, RepoURL: r.repo, Source: src, Config: eff, Secrets: secrets,
		Clone: func(ctx context.Context) (environment.Clone, error) {
			return src.Clone(ctx, taskID)
		},
		Spec:   sandbox.Spec{TaskID: taskID, Timeout: 10 * time.Minute},
		Events: func(ev task.Event) { events = append(events, ev) },
	})
	if p != nil {
		r.t.Cleanup(func() { p.Close(context.Background()) })
	}
	return p, &events, err
}

func execOK(t *testing.T, sb sandbox.Sandbox, cmd string) string {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: cmd, Timeout: time.Minute})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: %v exit %d\n%s", cmd, err, res.ExitCode, res.Output)
	}
	return strings.TrimSpace(string(res.Output))
}

const wrenchYAML = `setup:
  - mkdir -p .envcache && echo built > .envcache/marker
  - echo "token=$MY_SECRET" > "$HOME/.tokenrc" && echo "$MY_SECRET" > leaked.txt
test: go test ./...
`

func TestSnapshotLifecycle(t *testing.T) {
	r := newRig(t)
	r.git("init", "-q", "-b", "main")
	r.write("go.mod", "module example.com/m\n\ngo 1.19\n")
	r.write("m.go", "package m\n\nfunc F() int { return 1 }\n")
	r.write(".wrench.yaml", wrenchYAML)
	first := r.commit("first")
	const secret = "s3cr3t-value-for-the-scrub-test"
	secrets := map[string]string{"MY_SECRET": secret}

	// A miss: setup runs, the snapshot is saved, the sandbox is ready.
	p, events, err := r.prepare("t-env-1", secrets)
	if err != nil {
		t.Fatal(err)
	}
	if p.Setup.Snapshot != task.SnapshotMiss || !p.Setup.Passed || len(p.Setup.Commands) != 2 {
		t.Fatalf("first prepare: %+v", p.Setup)
	}
	if p.Base.Commit != first {
		t.Errorf("base %s, want %s", p.Base.Commit, first)
	}
	if got := execOK(t, p.Sandbox, "cat .envcache/marker"); got != "built" {
		t.Errorf("setup's output missing: %q", got)
	}
	if got := execOK(t, p.Sandbox, "git status --porcelain"); got != "" {
		t.Errorf("git status not clean:\n%s", got)
	}
	if got := execOK(t, p.Sandbox, "cat leaked.txt $HOME/.tokenrc"); strings.Contains(got, secret) || !strings.Contains(got, "[REDACTED]") {
		t.Errorf("secret not scrubbed from the snapshot's files: %q", got)
	}
	if got := execOK(t, p.Sandbox, "env"); strings.Contains(got, secret) {
		t.Error("secret in the agent phase's environment")
	}
	if d, err := p.Sandbox.(interface {
		Diff(context.Context) (string, error)
	}).Diff(context.Background()); err != nil || d != "" {
		t.Errorf("fresh diff %q, %v", d, err)
	}
	for _, ev := range *events {
		if strings.Contains(ev.Text, secret) {
			t.Errorf("secret in an event: %q", ev.Text)
		}
	}
	p.Close(context.Background())
	key := p.Setup.Key
	checkImageHasNo(t, r, r.store.Ref(key), secret)

	// The same commit again: a hit, no setup.
	p2, _, err := r.prepare("t-env-2", secrets)
	if err != nil {
		t.Fatal(err)
	}
	if p2.Setup.Snapshot != task.SnapshotHit || len(p2.Setup.Commands) != 0 || p2.Setup.Key != key {
		t.Errorf("second prepare: %+v", p2.Setup)
	}
	p2.Close(context.Background())

	// A source change is still a hit; the tree moves to the new commit.
	r.write("m.go", "package m\n\nfunc F() int { return 2 }\n")
	second := r.commit("second")
	p3, _, err := r.prepare("t-env-3", secrets)
	if err != nil {
		t.Fatal(err)
	}
	if p3.Setup.Snapshot != task.SnapshotHit || p3.Base.Commit != second {
		t.Errorf("third prepare: %+v base %s", p3.Setup, p3.Base.Commit)
	}
	if got := execOK(t, p3.Sandbox, "git rev-parse HEAD && grep -c 'return 2' m.go && git status --porcelain"); got != second+"\n1" {
		t.Errorf("after switch: %q", got)
	}
	if got := execOK(t, p3.Sandbox, "cat .envcache/marker"); got != "built" {
		t.Errorf("environment lost after switch: %q", got)
	}
	p3.Close(context.Background())

	// A manifest change is a miss.
	r.write("go.sum", "\n")
	r.commit("lockfile")
	p4, _, err := r.prepare("t-env-4", secrets)
	if err != nil {
		t.Fatal(err)
	}
	if p4.Setup.Snapshot != task.SnapshotMiss || p4.Setup.Key == key {
		t.Errorf("after a lockfile change: %+v", p4.Setup)
	}
	p4.Close(context.Background())

	// Prune to a budget keeps the most recently used.
	snaps, err := r.store.List(context.Background())
	if err != nil || len(snaps) != 2 {
		t.Fatalf("list: %v, %v", snaps, err)
	}
	for _, sn := range snaps {
		// A snapshot costs what it adds to its base image (here the Go
		// build cache its setup warmed), not the base.
		if sn.OwnSize <= 0 || sn.OwnSize > 256<<20 {
			t.Errorf("snapshot %s own size %d", sn.Key[:12], sn.OwnSize)
		}
	}
	removed, err := r.store.Prune(context.Background(), environment.PruneOptions{MaxBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 || removed[0].Key != key {
		t.Errorf("prune removed %v, want the older snapshot first", removed)
	}
}

// checkImageHasNo exports an image (every layer, its config and history)
// and fails if value occurs anywhere in it.
func checkImageHasNo(t *testing.T, r *rig, ref, value string) {
	t.Helper()
	cli, _, _ := denv.Setup(t)
	rc, err := cli.ImageSave(context.Background(), []string{ref})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(value)) {
		t.Errorf("the exported snapshot %s contains the secret", ref)
	}
	if len(data) < 1<<20 {
		t.Errorf("export of %s is only %d bytes", ref, len(data))
	}
}

func TestSetupFailure(t *testing.T) {
	r := newRig(t)
	r.git("init", "-q", "-b", "main")
	r.write(".wrench.yaml", "setup:\n  - echo preparing\n  - echo broken >&2; exit 7\n  - echo never\n")
	r.commit("first")
	_, _, err := r.prepare("t-env-fail", nil)
	var se *environment.SetupError
	if !errors.As(err, &se) {
		t.Fatalf("want SetupError, got %v", err)
	}
	if se.Run.ExitCode != 7 || se.Run.Passed || len(se.Run.Commands) != 2 || !strings.Contains(se.Run.Output, "broken") {
		t.Errorf("setup run %+v", se.Run)
	}
	if !strings.HasPrefix(err.Error(), task.ReasonSetupFailed) {
		t.Errorf("error %q", err)
	}
	if snaps, _ := r.store.List(context.Background()); len(snaps) != 0 {
		t.Errorf("a failed setup saved a snapshot: %v", snaps)
	}
}

// TestCloneTokenNotInSnapshot clones over https with a token (the GitHub
// stand-in requires it) and saves a snapshot: the token is in no file,
// config or history of the exported image, and the workspace's origin is
// the plain URL.
func TestCloneTokenNotInSnapshot(t *testing.T) {
	r := newRig(t)
	const token = "ghs_clonetoken0123456789abcdef"
	gh := githubtest.New(t, token)
	repo := gh.AddRepo(t, "acme", "app", map[string]string{"README.md": "hello\n", ".wrench.yaml": "setup: [\"git config --get remote.origin.url > origin.txt\"]\n"})
	m, err := workspace.NewManager(workspace.Config{Root: filepath.Join(t.TempDir(), "ws"), MirrorDir: filepath.Join(t.TempDir(), "mirrors"),
		Deployment: r.deploy, CABundle: gh.CA()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	u, err := url.Parse(repo.CloneURL)
	if err != nil {
		t.Fatal(err)
	}
	src, err := m.Resolve(ctx, task.Repo{URL: repo.CloneURL}, &workspace.Auth{Token: token, Hosts: []string{u.Host}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	data, err := src.ReadFile(repoconfig.FileName, repoconfig.MaxFileBytes)
	if err != nil {
		t.Fatal(err)
	}
	file, err := repoconfig.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	tk := task.Task{ID: "t-token", Repo: task.Repo{URL: repo.CloneURL}, Instruction: "x"}
	eff, err := policy.Default(policy.Options{}).Resolve(tk, file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.b.Prepare(ctx, environment.Request{TaskID: tk.ID, RepoURL: repo.CloneURL, Source: src, Config: eff,
		Clone: func(ctx context.Context) (environment.Clone, error) { return src.Clone(ctx, tk.ID) },
		Spec:  sandbox.Spec{TaskID: tk.ID, Timeout: 10 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if got := execOK(t, p.Sandbox, "cat origin.txt"); got != repo.CloneURL {
		t.Errorf("origin %q, want the plain URL %q", got, repo.CloneURL)
	}
	checkImageHasNo(t, r, r.store.Ref(p.Setup.Key), token)
}

// TestPrunedUnderBudget saves a second snapshot under a budget only one
// fits: the older one is removed, and the task that built the new one goes
// on as usual.
func TestPrunedUnderBudget(t *testing.T) {
	r := newRig(t)
	var err error
	r.b, err = environment.NewBuilder(environment.Config{Sandboxes: r.p, Images: r.p, Snapshots: r.p, Store: r.store, MaxBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.git("init", "-q", "-b", "main")
	r.write(".wrench.yaml", "setup: [\"echo one > env.txt\"]\n")
	r.commit("first")
	p1, _, err := r.prepare("t-budget-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	p1.Close(context.Background())
	r.write(".wrench.yaml", "setup: [\"echo two > env.txt\"]\n")
	r.commit("second")
	p2, _, err := r.prepare("t-budget-2", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := execOK(t, p2.Sandbox, "cat env.txt"); got != "two" {
		t.Errorf("the new environment's sandbox: %q", got)
	}
	snaps, err := r.store.List(context.Background())
	if err != nil || len(snaps) != 1 || snaps[0].Key != p2.Setup.Key {
		t.Errorf("after the second snapshot under a one-byte budget: %+v, %v", snaps, err)
	}
}
