package image

import (
	"bytes"
	"context"
	"github.com/wrenchworks/wrench/sandbox/docker"
	"github.com/wrenchworks/wrench/sandbox/docker/dockertest"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// requireDocker returns a client for the engine (see dockertest.Client).
func requireDocker(t *testing.T) *client.Client { return dockertest.Client(t) }

// countingEngine counts imports made through a real engine.
type countingEngine struct {
	Engine
	imports int
}

func (c *countingEngine) ImportImage(ctx context.Context, rootfs io.Reader, ref string, changes []string, comment string) error {
	c.imports++
	return c.Engine.ImportImage(ctx, rootfs, ref, changes, comment)
}

// runIn runs bash -c script in a fresh container of img, hardened the way
// sandboxes are, and returns its exit code and combined output.
func runIn(t *testing.T, c *client.Client, img string, env []string, script string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	created, err := c.ContainerCreate(ctx,
		&container.Config{Image: img, Cmd: []string{"bash", "-c", script}, Env: env},
		&container.HostConfig{
			NetworkMode:    "none",
			CapDrop:        []string{"ALL"},
			SecurityOpt:    []string{"no-new-privileges"},
			ReadonlyRootfs: true,
			Tmpfs:          map[string]string{"/tmp": "rw,exec,nosuid,size=512m", "/home/wrench": "rw,exec,nosuid,size=512m,uid=1000,gid=1000"},
		}, nil, nil, "")
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	defer func() {
		if err := c.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true}); err != nil {
			t.Errorf("remove container: %v", err)
		}
	}()
	waitC, errC := c.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := c.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start container: %v", err)
	}
	var code int
	select {
	case w := <-waitC:
		code = int(w.StatusCode)
	case err := <-errC:
		t.Fatalf("wait container: %v", err)
	}
	logs, err := c.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("container logs: %v", err)
	}
	defer logs.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, logs); err != nil {
		t.Fatalf("read logs: %v", err)
	}
	return code, out.String()
}

const tinyModule = `set -e
mkdir -p /tmp/m && cd /tmp/m
printf 'module example.com/calc\n\ngo 1.19\n' > go.mod
printf 'package calc\n\nfunc Add(a, b int) int { return a + b }\n' > calc.go
printf 'package calc\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal("bad")\n\t}\n}\n' > calc_test.go
`

// TestBuildDefaultImage builds the real default image (a no-op when it is
// already current) and checks what the sandbox relies on.
func TestBuildDefaultImage(t *testing.T) {
	c := requireDocker(t)
	ctx := context.Background()
	if err := Build(ctx, Options{Progress: testWriter{t}}); err != nil {
		t.Fatalf("Build: %v", err)
	}

	t.Run("second build is a no-op", func(t *testing.T) {
		eng := &countingEngine{Engine: docker.NewEngine(c)}
		if err := Build(ctx, Options{Engine: eng}); err != nil {
			t.Fatalf("Build: %v", err)
		}
		if eng.imports != 0 {
			t.Errorf("second Build imported %d times, want 0", eng.imports)
		}
		ok, err := Exists(ctx, DefaultTag)
		if err != nil || !ok {
			t.Errorf("Exists = %v, %v; want true", ok, err)
		}
	})

	checks := []struct {
		name   string
		env    []string
		script string
		want   []string
	}{
		{
			name:   "tools",
			script: "git --version && python3 -m pytest --version && go version && id -u && id -g && pwd && echo $HOME",
			want:   []string{"git version", "pytest", "go version go1.24", "\n1000\n1000\n/workspace\n/home/wrench\n"},
		},
		{
			name:   "current toolchains, Go's caches in the home directory, toolchain switching on",
			script: "python3 --version && go env GOTOOLCHAIN GOPATH GOCACHE && make --version | head -1 && curl --version | head -1 && python3 -m venv --help >/dev/null && echo venv",
			want:   []string{"Python 3.13", "auto\n/home/wrench/go\n/home/wrench/.cache/go-build\n", "GNU Make", "curl", "venv"},
		},
		{
			name:   "git accepts any owner and has an identity",
			script: "cd /tmp && git init -q r && cd r && git commit -q --allow-empty -m x && git log --format=%an && git config --system safe.directory",
			want:   []string{"Wrench Sandbox", "*"},
		},
		{
			name:   "go test starts from the seeded cache",
			script: tinyModule + "go test ./... && test -e $GOCACHE/trim.txt -o -n \"$(ls $GOCACHE)\" && echo seeded",
			want:   []string{"ok  \texample.com/calc", "seeded"},
		},
		{
			name:   "seeding can be turned off",
			env:    []string{"WRENCH_GOCACHE_SEED="},
			script: "go env GOROOT >/dev/null && test ! -e $GOCACHE && echo unseeded",
			want:   []string{"unseeded"},
		},
		{
			name:   "pytest runs",
			script: "mkdir /tmp/p && cd /tmp/p && printf 'def test_x():\\n    assert 1 + 1 == 2\\n' > test_x.py && python3 -m pytest -q && test ! -e .pytest_cache && echo clean",
			want:   []string{"1 passed", "clean"},
		},
	}
	for _, tc := range checks {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runIn(t, c, DefaultTag, tc.env, tc.script)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// testWriter sends mmdebstrap's progress to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
