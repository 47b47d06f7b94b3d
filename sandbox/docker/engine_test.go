package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker"
	"github.com/wrenchworks/wrench/sandbox/docker/dockertest"
)

// rootfs is a root file system of one file, as a tar stream.
func rootfs(t *testing.T) io.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "x", Mode: 0o755, Size: 2, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte("x\n"))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// failingReader fails after a few bytes, as a build that dies mid-stream.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n > 0 {
		r.n--
		return copy(p, "tar"), nil
	}
	return 0, errors.New("mmdebstrap died")
}

// TestEngineImages: an imported image carries its labels and is listed by
// them; a stream that fails tags nothing; RemoveImageIfUnused leaves an
// image a container was made from (what image.Build relies on to keep a
// previous image in use), RemoveImage does not; removing what is gone is
// not an error.
func TestEngineImages(t *testing.T) {
	cli := dockertest.Client(t)
	eng := docker.NewEngine(cli)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dep := dockertest.Deployment(t)
	ref, broken := dep+":1", dep+":broken"
	t.Cleanup(func() {
		dockertest.RemoveAll(t, cli, dep)
		eng.RemoveImage(context.Background(), ref)
	})

	if err := eng.ImportImage(ctx, rootfs(t), ref, []string{"LABEL dev.wrench.test=" + dep}, "engine test"); err != nil {
		t.Fatalf("ImportImage: %v", err)
	}
	img, ok, err := eng.InspectImage(ctx, ref)
	if err != nil || !ok || img.Labels["dev.wrench.test"] != dep {
		t.Fatalf("InspectImage = %+v, %v, %v; want the image with its label", img, ok, err)
	}
	if list, err := eng.Images(ctx, "dev.wrench.test="+dep); err != nil || len(list) != 1 || list[0].ID != img.ID {
		t.Errorf("Images by label = %+v, %v; want the one image", list, err)
	}
	if err := eng.ImportImage(ctx, &failingReader{n: 1}, broken, nil, "engine test"); err == nil {
		t.Error("ImportImage of a failing stream succeeded")
	}
	if _, ok, _ := eng.InspectImage(ctx, broken); ok {
		t.Errorf("a failed import tagged %s", broken)
		eng.RemoveImage(ctx, broken)
	}

	made, err := cli.ContainerCreate(ctx, &container.Config{Image: ref, Cmd: []string{"/x"},
		Labels: map[string]string{sandbox.LabelDeployment: dep}}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatalf("create a container of the image: %v", err)
	}
	if err := eng.RemoveImageIfUnused(ctx, img.ID); err == nil {
		t.Error("RemoveImageIfUnused removed an image a container was made from")
	}
	if _, ok, _ := eng.InspectImage(ctx, ref); !ok {
		t.Fatal("the image in use is gone")
	}
	if err := eng.RemoveImage(ctx, img.ID); err != nil {
		t.Errorf("RemoveImage of an image a stopped container was made from: %v", err)
	}
	if _, ok, _ := eng.InspectImage(ctx, ref); ok {
		t.Error("RemoveImage left the image")
	}
	if err := eng.RemoveImageIfUnused(ctx, img.ID); err != nil {
		t.Errorf("RemoveImageIfUnused of a gone image: %v", err)
	}
	if err := eng.RemoveContainer(ctx, made.ID); err != nil {
		t.Errorf("RemoveContainer: %v", err)
	}
}

// TestEngineContainers: the listing finds a running sandbox by its labels,
// with its creation time; RemoveContainer removes it though it runs, and
// again without error.
func TestEngineContainers(t *testing.T) {
	f := newFixture(t, nil)
	sb := f.start(t, sandbox.Spec{TaskID: "t-engine"})
	eng := docker.NewEngine(f.cli)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	list, err := eng.Containers(ctx, sandbox.LabelDeployment+"="+f.deployment, sandbox.LabelTask+"=t-engine")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != sb.ID() || list[0].Labels[sandbox.LabelManaged] != "true" ||
		time.Since(list[0].Created) > 5*time.Minute {
		t.Fatalf("Containers = %+v, want the sandbox %s with its labels and creation time", list, sb.ID())
	}
	if other, err := eng.Containers(ctx, sandbox.LabelDeployment+"="+f.deployment, sandbox.LabelTask+"=t-other"); err != nil || len(other) != 0 {
		t.Errorf("Containers of another task = %+v, %v; want none", other, err)
	}
	for range 2 {
		if err := eng.RemoveContainer(ctx, sb.ID()); err != nil {
			t.Errorf("RemoveContainer: %v", err)
		}
	}
	if left, _ := eng.Containers(ctx, sandbox.LabelDeployment+"="+f.deployment); len(left) != 0 {
		t.Errorf("left after RemoveContainer: %+v", left)
	}
}
