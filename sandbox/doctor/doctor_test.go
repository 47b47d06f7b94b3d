package doctor

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker"
	"github.com/wrenchworks/wrench/sandbox/image"
)

var update = flag.Bool("update", false, "rewrite golden files")

type fakeEngine struct {
	version    docker.Version
	versionErr error
	info       docker.Info
	infoErr    error
	images     map[string]sandbox.Image
	// mountsErr is what CheckBindSources returns; mounts records its
	// paths.
	mountsErr error
	mounts    []string
}

func (f *fakeEngine) Version(context.Context) (docker.Version, error) {
	return f.version, f.versionErr
}
func (f *fakeEngine) Info(context.Context) (docker.Info, error) { return f.info, f.infoErr }
func (f *fakeEngine) InspectImage(_ context.Context, ref string) (sandbox.Image, bool, error) {
	img, ok := f.images[ref]
	return img, ok, nil
}
func (f *fakeEngine) CheckBindSources(_ context.Context, _ string, paths []string) error {
	f.mounts = append(f.mounts, paths...)
	return f.mountsErr
}

// healthy is the engine on the machine this was written on: Debian's
// Docker 20.10 on cgroup v2.
func healthy() *fakeEngine {
	return &fakeEngine{
		version: docker.Version{Engine: "20.10.24+dfsg1", API: "1.41", MinAPI: "1.12", Negotiated: "1.41"},
		info: docker.Info{
			OS: "Debian GNU/Linux 12 (bookworm)", Kernel: "6.1.0", NCPU: 2, MemTotal: 8 << 30,
			CgroupVersion: "2", CgroupDriver: "systemd",
			MemoryLimit: true, SwapLimit: true, PidsLimit: true, CPUQuota: true,
			Runtimes:        []string{"io.containerd.runc.v2", "runc"},
			DefaultRuntime:  "runc",
			SecurityOptions: []string{"name=apparmor", "name=seccomp,profile=default", "name=cgroupns"},
		},
		images: map[string]sandbox.Image{
			image.DefaultTag: {ID: "sha256:abc", Size: 462e6, Labels: map[string]string{image.LabelRecipe: image.RecipeHash()}},
		},
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name         string
		mutate       func(*fakeEngine)
		opts         Options
		wantProblems []string // substrings, one per problem, in order
		wantWarnings []string
	}{
		{name: "healthy"},
		{
			name:         "engine unreachable",
			mutate:       func(f *fakeEngine) { f.versionErr = errors.New("Cannot connect to the Docker daemon") },
			wantProblems: []string{"docker engine unreachable"},
		},
		{
			name:         "engine too old",
			mutate:       func(f *fakeEngine) { f.version.API = "1.40" },
			wantProblems: []string{"engine API 1.40 is older than 1.41"},
		},
		{
			name:         "no memory or pids limits",
			mutate:       func(f *fakeEngine) { f.info.MemoryLimit, f.info.PidsLimit = false, false },
			wantProblems: []string{"memory limits", "pids limits"},
		},
		{
			name:         "swap and cpu not limited",
			mutate:       func(f *fakeEngine) { f.info.SwapLimit, f.info.CPUQuota = false, false },
			wantWarnings: []string{"CPU limits", "swap is not limited"},
		},
		{
			name:         "runsc configured, not installed",
			opts:         Options{Runtime: "runsc"},
			wantProblems: []string{`runtime "runsc" is not installed`},
		},
		{
			name:   "runsc configured and installed",
			opts:   Options{Runtime: "runsc"},
			mutate: func(f *fakeEngine) { f.info.Runtimes = append(f.info.Runtimes, "runsc") },
		},
		{
			name:         "default image missing",
			mutate:       func(f *fakeEngine) { delete(f.images, image.DefaultTag) },
			wantProblems: []string{"sandbox image wrench-sandbox:default not found"},
		},
		{
			name:         "other image missing",
			opts:         Options{Image: "acme/sandbox:1"},
			wantProblems: []string{"sandbox image acme/sandbox:1 not found"},
		},
		{
			name: "default image from an older recipe",
			mutate: func(f *fakeEngine) {
				f.images[image.DefaultTag].Labels[image.LabelRecipe] = "sha256:old"
			},
			wantWarnings: []string{"older recipe"},
		},
		{
			name:         "no seccomp",
			mutate:       func(f *fakeEngine) { f.info.SecurityOptions = []string{"name=rootless"} },
			wantWarnings: []string{"no seccomp"},
		},
		{
			name:         "engine cannot see the data dir",
			opts:         Options{BindSources: []string{"/var/lib/wrench"}},
			mutate:       func(f *fakeEngine) { f.mountsErr = &docker.HiddenPathsError{Paths: []string{"/var/lib/wrench"}} },
			wantProblems: []string{"cannot see /var/lib/wrench at the same path"},
		},
		{
			name:         "mount check fails",
			opts:         Options{BindSources: []string{"/var/lib/wrench"}},
			mutate:       func(f *fakeEngine) { f.mountsErr = errors.New("engine busy") },
			wantWarnings: []string{"could not check that the engine sees /var/lib/wrench: engine busy"},
		},
		{
			name:         "info fails",
			mutate:       func(f *fakeEngine) { f.infoErr = errors.New("boom") },
			wantProblems: []string{"docker info failed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := healthy()
			if tt.mutate != nil {
				tt.mutate(eng)
			}
			r := Check(context.Background(), eng, tt.opts)
			matchFindings(t, "problem", r.Problems, tt.wantProblems)
			matchFindings(t, "warning", r.Warnings, tt.wantWarnings)
			if r.OK() != (len(tt.wantProblems) == 0) {
				t.Errorf("OK() = %v with problems %v", r.OK(), r.Problems)
			}
		})
	}
}

func matchFindings(t *testing.T, kind string, got []Finding, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%ss = %+v, want %d matching %q", kind, got, len(want), want)
		return
	}
	for i, w := range want {
		if !strings.Contains(got[i].Message, w) {
			t.Errorf("%s %d = %q, want it to contain %q", kind, i, got[i].Message, w)
		}
	}
}

func TestFacts(t *testing.T) {
	eng := healthy()
	eng.info.SecurityOptions = append(eng.info.SecurityOptions, "name=rootless", "name=userns")
	eng.info.Runtimes = append(eng.info.Runtimes, "runsc")
	r := Check(context.Background(), eng, Options{})
	if !r.Rootless || !r.UserNS || !r.Seccomp || !r.AppArmor || r.SELinux || !r.Runsc {
		t.Errorf("security/runtime facts wrong: %+v", r)
	}
	if r.NegotiatedAPIVersion != "1.41" || r.APIVersion != "1.41" || r.CgroupVersion != "2" || !r.Image.Present || !r.Image.Current {
		t.Errorf("engine facts wrong: %+v", r)
	}
	if strings.Join(r.Runtimes, ",") != "io.containerd.runc.v2,runc,runsc" {
		t.Errorf("runtimes = %v, want sorted names", r.Runtimes)
	}
}

func TestWriteTextGolden(t *testing.T) {
	cases := map[string]func(*fakeEngine){
		"healthy": nil,
		"broken": func(f *fakeEngine) {
			f.info.PidsLimit = false
			f.info.SwapLimit = false
			delete(f.images, image.DefaultTag)
		},
		"unreachable": func(f *fakeEngine) {
			f.versionErr = errors.New("dial unix /var/run/docker.sock: connect: no such file or directory")
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			eng := healthy()
			if mutate != nil {
				mutate(eng)
			}
			r := Check(context.Background(), eng, Options{Runtime: map[bool]string{true: "runsc"}[name == "broken"]})
			var buf bytes.Buffer
			if err := r.WriteText(&buf); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if buf.String() != string(want) {
				t.Errorf("text report changed (run with -update if intended):\ngot:\n%s\nwant:\n%s", buf.String(), want)
			}
		})
	}
}

func TestVersionLess(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		less bool
	}{{"1.40", "1.41", true}, {"1.41", "1.41", false}, {"1.9", "1.41", true}, {"1.43", "1.41", false}, {"2.0", "1.41", false}, {"1", "1.41", true}} {
		if got := versionLess(tt.a, tt.b); got != tt.less {
			t.Errorf("versionLess(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.less)
		}
	}
}
