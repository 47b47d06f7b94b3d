package docker_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker"
)

func TestReap(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	live := f.start(t, sandbox.Spec{TaskID: "mine"})

	// A process that has exited stands for a crashed worker.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	create := func(pid int, host string, created time.Time) string {
		labels := map[string]string{
			sandbox.LabelManaged:    "true",
			sandbox.LabelDeployment: f.deployment,
			sandbox.LabelTask:       "crashed",
			sandbox.LabelCreated:    created.UTC().Format(time.RFC3339),
			sandbox.LabelOwnerPID:   strconv.Itoa(pid),
			sandbox.LabelOwnerHost:  host,
		}
		c, err := f.cli.ContainerCreate(ctx, &container.Config{Image: f.image, Cmd: []string{"true"}, Labels: labels}, nil, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	orphan := create(dead.Process.Pid, host, time.Now())
	otherHost := create(dead.Process.Pid, "elsewhere", time.Now())
	oldOtherHost := create(dead.Process.Pid, "elsewhere", time.Now().Add(-48*time.Hour))

	got, err := f.p.Reap(ctx, docker.ReapOptions{DryRun: true})
	if err != nil || !slices.Equal(got, []string{orphan}) {
		t.Fatalf("dry run = %v, %v; want only %s", got, err, orphan)
	}
	got, err = f.p.Reap(ctx, docker.ReapOptions{MaxAge: 24 * time.Hour})
	slices.Sort(got)
	want := []string{orphan, oldOtherHost}
	slices.Sort(want)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Reap = %v, %v; want %v", got, err, want)
	}
	if _, err := f.cli.ContainerInspect(ctx, live.ID()); err != nil {
		t.Errorf("live sandbox was removed: %v", err)
	}
	if _, err := f.cli.ContainerInspect(ctx, orphan); err == nil {
		t.Error("orphan still there")
	}
	f.cli.ContainerRemove(ctx, otherHost, container.RemoveOptions{Force: true})
}
