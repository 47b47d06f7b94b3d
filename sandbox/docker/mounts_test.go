package docker_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker"
)

// TestCheckBindSourcesVisible: paths this process shares with the engine
// pass, and neither a probe file nor a container is left.
func TestCheckBindSourcesVisible(t *testing.T) {
	f := newFixture(t, nil)
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "shim")
	if err := os.WriteFile(file, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := containerCount(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.p.CheckBindSources(ctx, dir, file); err != nil {
		t.Fatalf("CheckBindSources: %v", err)
	}
	for _, d := range []string{dir, filepath.Dir(file), filepath.Dir(f.shim)} {
		if probes, _ := filepath.Glob(filepath.Join(d, ".wrench-probe-*")); len(probes) > 0 {
			t.Errorf("probes left in %s: %v", d, probes)
		}
	}
	if after := containerCount(t, f); after != before {
		t.Errorf("containers: %d before, %d after", before, after)
	}
}

// TestCheckBindSourcesHidden: a directory the engine cannot see (a tmpfs
// mounted in a mount namespace of this thread only, as a container's
// volume is to the engine's host) is named in a HiddenPathsError with the
// fix, while a visible one beside it is not.
func TestCheckBindSourcesHidden(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: this test needs root (a private mount namespace)")
		}
		t.Skip("needs root for a private mount namespace")
	}
	f := newFixture(t, nil)
	visible := t.TempDir()
	hidden := t.TempDir()
	errc := make(chan error, 1)
	go func() {
		// The thread is left in its own mount namespace: never unlocked,
		// so it ends with this goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errc <- err
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			errc <- err
			return
		}
		if err := unix.Mount("tmpfs", hidden, "tmpfs", 0, "size=1m"); err != nil {
			errc <- err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		errc <- f.p.CheckBindSources(ctx, visible, hidden)
	}()
	err := <-errc
	var he *docker.HiddenPathsError
	if !errors.As(err, &he) {
		t.Fatalf("err = %v, want a HiddenPathsError", err)
	}
	if !slices.Equal(he.Paths, []string{hidden}) {
		t.Errorf("hidden paths %v, want [%s]", he.Paths, hidden)
	}
	if !strings.Contains(err.Error(), "same path") || he.Fix() == "" {
		t.Errorf("error without the fix: %v", err)
	}
}

// TestCheckBindSourcesNoImage: without the image the check cannot tell,
// and says the image is missing.
func TestCheckBindSourcesNoImage(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := docker.NewEngine(f.cli).CheckBindSources(ctx, "wrench-test-absent:nope", []string{t.TempDir()})
	if sandbox.KindOf(err) != sandbox.ErrImageMissing {
		t.Fatalf("err = %v, want ErrImageMissing", err)
	}
}

func containerCount(t *testing.T, f *fixture) int {
	t.Helper()
	cs, err := f.cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("ancestor", f.image))})
	if err != nil {
		t.Fatal(err)
	}
	return len(cs)
}
