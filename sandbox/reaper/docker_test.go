package reaper

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker"
	"github.com/wrenchworks/wrench/sandbox/docker/dockertest"
	"github.com/wrenchworks/wrench/task"
	"github.com/wrenchworks/wrench/workspace"
)

// The helper process makes a workspace and a container the way a worker
// does, then exits without cleaning up: a crash with a real dead pid.
const helperEnv = "WRENCH_REAPER_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		if err := helper(); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func helper() error {
	ctx := context.Background()
	deployment, root, repo := os.Getenv("DEPLOYMENT"), os.Getenv("WS_ROOT"), os.Getenv("REPO")
	m, err := workspace.NewManager(workspace.Config{Root: root, Deployment: deployment})
	if err != nil {
		return err
	}
	if _, err := m.Open(ctx, "orphan-task", task.Repo{URL: repo}, nil); err != nil {
		return err
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	_, err = startContainer(ctx, cli, ownLabels(deployment, "orphan-task"))
	return err
}

// The engine handle and the workspace manager are what the reaper is
// given in production.
var (
	_ Containers = (*docker.Engine)(nil)
	_ Workspaces = (*workspace.Manager)(nil)
)

func ownLabels(deployment, taskID string) map[string]string {
	host, _ := os.Hostname()
	return sandbox.ResourceLabels(deployment, taskID, sandbox.OwnerLabels(host))
}

func startContainer(ctx context.Context, cli *client.Client, labels map[string]string) (string, error) {
	c, err := cli.ContainerCreate(ctx,
		&container.Config{Image: dockertest.Image, Cmd: []string{"sleep", "3600"}, Labels: labels},
		&container.HostConfig{NetworkMode: "none", CapDrop: []string{"ALL"}}, nil, nil, "")
	if err != nil {
		return "", fmt.Errorf("create container: %w", err)
	}
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		return c.ID, fmt.Errorf("start container: %w", err)
	}
	return c.ID, nil
}

func requireDocker(t *testing.T) *client.Client {
	t.Helper()
	c := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := dockertest.BuildImage(ctx, c); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("test image: %v", err)
		}
		t.Skipf("test image: %v", err)
	}
	return c
}

func containersOf(t *testing.T, cli *client.Client, deployment string) map[string]string {
	t.Helper()
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", sandbox.LabelDeployment+"="+deployment))})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range list {
		out[c.ID] = c.Labels[sandbox.LabelTask]
	}
	return out
}

func removeAll(t *testing.T, cli *client.Client, deployment string) {
	for id := range containersOf(t, cli, deployment) {
		cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true})
	}
}

func randomName(prefix string) string {
	var b [4]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// TestSweepRealOrphans kills nothing: it runs the helper process to
// completion, so its pid is really gone, and checks that a sweep removes
// its container and workspace while leaving this process's live task and
// another deployment alone.
func TestSweepRealOrphans(t *testing.T) {
	cli := requireDocker(t)
	ctx := context.Background()
	deployment, other := randomName("reaper-test-"), randomName("reaper-other-")
	t.Cleanup(func() { removeAll(t, cli, deployment); removeAll(t, cli, other) })

	repo := filepath.Join(t.TempDir(), "repo")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", repo},
		{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "init"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	root := filepath.Join(t.TempDir(), "workspaces")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "DEPLOYMENT="+deployment, "WS_ROOT="+root, "REPO="+repo)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}

	m, err := workspace.NewManager(workspace.Config{Root: root, Deployment: deployment})
	if err != nil {
		t.Fatal(err)
	}
	live, err := m.Open(ctx, "live-task", task.Repo{URL: repo}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	liveID, err := startContainer(ctx, cli, ownLabels(deployment, "live-task"))
	if err != nil {
		t.Fatal(err)
	}
	// Another deployment's orphan, with the same dead-owner story.
	otherLabels := ownLabels(other, "orphan-task")
	otherLabels[sandbox.LabelOwnerPID] = strconv.Itoa(cmd.Process.Pid)
	otherID, err := startContainer(ctx, cli, otherLabels)
	if err != nil {
		t.Fatal(err)
	}

	before, err := m.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 2 || len(containersOf(t, cli, deployment)) != 2 {
		t.Fatalf("setup: %d workspaces and %d containers, want 2 and 2", len(before), len(containersOf(t, cli, deployment)))
	}

	r, err := New(Config{
		Docker: docker.NewEngine(cli), Workspaces: m, Deployment: deployment,
		Alive: func(id string) bool { return id == "live-task" },
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Sweep(ctx)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if len(rep.Containers) != 1 || rep.Containers[0].TaskID != "orphan-task" ||
		len(rep.Workspaces) != 1 || rep.Workspaces[0].TaskID != "orphan-task" {
		t.Errorf("report = %+v, want the orphan's container and workspace", rep)
	}
	left := containersOf(t, cli, deployment)
	if len(left) != 1 || left[liveID] != "live-task" {
		t.Errorf("containers left = %v, want only the live task's %s", left, liveID[:12])
	}
	after, err := m.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 1 || after[0].TaskID != "live-task" {
		t.Errorf("workspaces left = %+v, want only the live task's", after)
	}
	for _, w := range before {
		if w.TaskID == "orphan-task" {
			if _, err := os.Stat(w.Dir); !os.IsNotExist(err) {
				t.Errorf("orphan workspace %s still on disk (%v)", w.Dir, err)
			}
		}
	}
	if got := containersOf(t, cli, other); got[otherID] == "" {
		t.Errorf("another deployment's container was removed")
	}
	if strings.Contains(fmt.Sprint(rep), other) {
		t.Errorf("report mentions another deployment: %+v", rep)
	}
}

// TestRealOwnerIdentity labels real containers with real processes as their
// owners: a zombie (a child that exited and was not waited for) is dead; a
// live process whose start time is not the label's is a reused pid; the
// same process with the label's start time keeps its container; a final
// task's container goes on sight although its owner (this process) lives;
// RemoveTask removes a task's containers and workspaces whoever owns them.
func TestRealOwnerIdentity(t *testing.T) {
	cli := requireDocker(t)
	ctx := context.Background()
	deployment := randomName("reaper-owner-")
	t.Cleanup(func() { removeAll(t, cli, deployment) })

	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	defer zombie.Wait()
	var zst sandbox.ProcStat
	for deadline := time.Now().Add(30 * time.Second); zst.State != 'Z'; {
		var err error
		if zst, err = sandbox.ReadProcStat(zombie.Process.Pid); err != nil || time.Now().After(deadline) {
			t.Fatalf("child %d never became a zombie: %+v %v", zombie.Process.Pid, zst, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	live := exec.Command("sleep", "300")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	lst, err := sandbox.ReadProcStat(live.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	owned := func(task string, pid int, start uint64) map[string]string {
		l := ownLabels(deployment, task)
		l[sandbox.LabelOwnerPID] = strconv.Itoa(pid)
		l[sandbox.LabelOwnerStart] = strconv.FormatUint(start, 10)
		return l
	}
	ids := map[string]string{}
	for task, l := range map[string]map[string]string{
		"t-zombie": owned("t-zombie", zombie.Process.Pid, zst.Start),
		"t-reused": owned("t-reused", live.Process.Pid, lst.Start+1),
		"t-live":   owned("t-live", live.Process.Pid, lst.Start),
		"t-final":  ownLabels(deployment, "t-final"),
		"t-mine":   ownLabels(deployment, "t-mine"),
	} {
		id, err := startContainer(ctx, cli, l)
		if err != nil {
			t.Fatal(err)
		}
		ids[task] = id
	}
	r, err := New(Config{Docker: docker.NewEngine(cli), Deployment: deployment,
		Final: func(_ context.Context, id string) (bool, error) { return id == "t-final", nil }})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	causes := map[string]string{}
	for _, c := range rep.Containers {
		causes[c.TaskID] = c.Cause
	}
	want := map[string]string{"t-zombie": CauseOwnerZombie, "t-reused": CausePIDReused, "t-final": CauseTaskFinal}
	if !maps.Equal(causes, want) {
		t.Errorf("removed with causes %v, want %v", causes, want)
	}
	left := containersOf(t, cli, deployment)
	if len(left) != 2 || left[ids["t-live"]] == "" || left[ids["t-mine"]] == "" {
		t.Errorf("left %v, want t-live's and t-mine's", left)
	}

	// A redelivery of t-live removes its container and workspace though
	// their owner runs.
	root := filepath.Join(t.TempDir(), "workspaces")
	m, err := workspace.NewManager(workspace.Config{Root: root, Deployment: deployment})
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(t.TempDir(), "repo")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", repo},
		{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "init"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	if _, err := m.Open(ctx, "t-live", task.Repo{URL: repo}, nil); err != nil {
		t.Fatal(err)
	}
	r, err = New(Config{Docker: docker.NewEngine(cli), Workspaces: m, Deployment: deployment})
	if err != nil {
		t.Fatal(err)
	}
	rep, err = r.RemoveTask(ctx, "t-live")
	if err != nil || len(rep.Containers) != 1 || len(rep.Workspaces) != 1 || rep.Containers[0].Cause != CauseRedelivered {
		t.Fatalf("RemoveTask = %+v, %v; want t-live's container and workspace", rep, err)
	}
	if left := containersOf(t, cli, deployment); len(left) != 1 || left[ids["t-mine"]] == "" {
		t.Errorf("left %v after RemoveTask, want only t-mine's", left)
	}
	if ws, _ := m.List(); len(ws) != 0 {
		t.Errorf("workspaces left: %+v", ws)
	}
}
