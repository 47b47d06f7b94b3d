// Package dockertest gives tests a real Docker engine, a small test image
// and a static shim binary, or skips them (fails them under CI=true) when
// there is no engine.
package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker"
)

// Image is the test image: a static busybox on scratch (sh, no bash).
const Image = "wrench-test-busybox:latest"

// DefaultImage is the product's sandbox image (`wrench image build`); tests
// fall back to it when no busybox is at hand to build [Image].
const DefaultImage = sandbox.DefaultImage

// Env builds what Docker tests need once per test binary. Declare one in
// the test package and call Cleanup from TestMain after m.Run.
type Env struct {
	once  sync.Once
	dir   string
	cli   *client.Client
	shim  string
	image string
	skip  string
	err   error
}

// Setup returns an engine client, the shim binary's path and the test
// image ([Image], or [DefaultImage] when there is no busybox to build it
// from), building them on first use. Without an engine or an image it
// skips t, or fails it when CI=true.
func (e *Env) Setup(t testing.TB) (cli *client.Client, shimPath, image string) {
	t.Helper()
	e.once.Do(e.setup)
	if e.skip != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s", e.skip)
		}
		t.Skip(e.skip)
	}
	if e.err != nil {
		t.Fatal(e.err)
	}
	return e.cli, e.shim, e.image
}

// Cleanup removes the built shim and closes the client.
func (e *Env) Cleanup() {
	if e.dir != "" {
		os.RemoveAll(e.dir)
	}
	if e.cli != nil {
		e.cli.Close()
	}
}

func (e *Env) setup() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		e.skip = fmt.Sprintf("no docker client: %v", err)
		return
	}
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = cli.Ping(pctx)
	pcancel()
	if err != nil {
		cli.Close()
		e.skip = fmt.Sprintf("docker engine not reachable: %v", err)
		return
	}
	e.cli = cli
	e.image = Image
	if err := BuildImage(ctx, cli); err != nil {
		if !errors.Is(err, errNoBusybox) {
			e.err = err
			return
		}
		if _, ierr := cli.ImageInspect(ctx, DefaultImage); ierr != nil {
			e.skip = err.Error() + ", and no " + DefaultImage + " (wrench image build)"
			return
		}
		e.image = DefaultImage
	}
	e.dir, err = os.MkdirTemp("", "wrench-dockertest-")
	if err != nil {
		e.err = err
		return
	}
	e.shim, e.err = BuildShim(ctx, e.dir)
}

// BuildShim builds ./cmd/wrench statically (CGO_ENABLED=0) into dir, or
// returns $WRENCH_TEST_SHIM when set (a prebuilt static wrench binary).
func BuildShim(ctx context.Context, dir string) (string, error) {
	if prebuilt := os.Getenv("WRENCH_TEST_SHIM"); prebuilt != "" {
		return filepath.Abs(prebuilt)
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "wrench")
	var lastErr error
	for attempt := range 5 { // other engineers may be mid-edit in cmd/wrench
		if attempt > 0 {
			time.Sleep(10 * time.Second)
		}
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/wrench")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		msg, err := cmd.CombinedOutput()
		if err == nil {
			return out, nil
		}
		lastErr = fmt.Errorf("go build ./cmd/wrench: %v\n%s", err, msg)
	}
	return "", lastErr
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the test's directory")
		}
		dir = parent
	}
}

var errNoBusybox = errors.New("no static busybox to build the test image from (apt-get install busybox-static, or set WRENCH_TEST_BUSYBOX)")

// BuildImage builds [Image] unless it exists: busybox with its applets
// linked in /bin, and a passwd entry for wrench (sandbox.UID).
func BuildImage(ctx context.Context, cli *client.Client) error {
	if _, err := cli.ImageInspect(ctx, Image); err == nil {
		return nil
	}
	bb := os.Getenv("WRENCH_TEST_BUSYBOX")
	if bb == "" {
		bb = "/bin/busybox"
	}
	bin, err := os.ReadFile(bb)
	if err != nil {
		return errNoBusybox
	}
	applets, err := exec.CommandContext(ctx, bb, "--list").Output()
	if err != nil {
		return fmt.Errorf("%s --list: %w", bb, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	file := func(name string, mode int64, data []byte) {
		tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write(data)
	}
	file("Dockerfile", 0o644, []byte("FROM scratch\nCOPY rootfs/ /\n"))
	file("rootfs/bin/busybox", 0o755, bin)
	file("rootfs/etc/passwd", 0o644, fmt.Appendf(nil, "root:x:0:0:root:/root:/bin/sh\nwrench:x:%d:%d:wrench:%s:/bin/sh\n", sandbox.UID, sandbox.GID, sandbox.HomeDir))
	file("rootfs/etc/group", 0o644, fmt.Appendf(nil, "root:x:0:\nwrench:x:%d:\n", sandbox.GID))
	for _, a := range strings.Fields(string(applets)) {
		if a != "busybox" {
			tw.WriteHeader(&tar.Header{Name: "rootfs/bin/" + a, Linkname: "busybox", Typeflag: tar.TypeSymlink, Mode: 0o777})
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	resp, err := cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{Tags: []string{Image}, Remove: true, ForceRemove: true})
	if err != nil {
		return fmt.Errorf("build %s: %w", Image, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	// API v1.48 deprecates the progress stream's "error" field for
	// "errorDetail"; either means the build failed.
	if bytes.Contains(out, []byte(`"error"`)) || bytes.Contains(out, []byte(`"errorDetail"`)) {
		return fmt.Errorf("build %s: %s", Image, out)
	}
	if _, err := cli.ImageInspect(ctx, Image); err != nil {
		return fmt.Errorf("build %s: %w: %s", Image, err, out)
	}
	return nil
}

// Deployment returns a fresh deployment name, so a test can count the
// containers it made by label.
func Deployment(t testing.TB) string {
	var b [4]byte
	rand.Read(b[:])
	return "wrench-test-" + hex.EncodeToString(b[:])
}

// Containers lists the ids of all containers (running or not) labelled
// with deployment.
func Containers(t testing.TB, cli *client.Client, deployment string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelDeployment+"="+deployment)),
	})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	ids := make([]string, len(list))
	for i, c := range list {
		ids[i] = c.ID
	}
	return ids
}

// RemoveAll force-removes every container labelled with deployment (test
// cleanup for containers a failing test left behind).
func RemoveAll(t testing.TB, cli *client.Client, deployment string) {
	t.Helper()
	for _, id := range Containers(t, cli, deployment) {
		cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true})
	}
}

// Engine returns [Client] as a [docker.Engine], for the packages that
// consume the engine through it.
func Engine(t testing.TB) *docker.Engine {
	t.Helper()
	return docker.NewEngine(Client(t))
}

// Client returns a client for the engine the environment names, closed
// when t ends. Without a reachable engine it skips t, except under CI=true,
// where it fails t.
func Client(t testing.TB) *client.Client {
	t.Helper()
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = c.Ping(ctx)
		cancel()
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("docker engine required under CI=true: %v", err)
		}
		t.Skipf("no docker engine reachable (%v); skipping", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
