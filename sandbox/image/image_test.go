package image

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wrenchworks/wrench/sandbox"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fakeEngine is an in-memory image store.
type fakeEngine struct {
	mu       sync.Mutex
	images   map[string]sandbox.Image // by tag
	imports  int
	imported []byte
	removed  []string
	inspErr  error
	nextID   int
}

func (f *fakeEngine) InspectImage(_ context.Context, ref string) (sandbox.Image, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inspErr != nil {
		return sandbox.Image{}, false, f.inspErr
	}
	img, ok := f.images[ref]
	return img, ok, nil
}

func (f *fakeEngine) ImportImage(_ context.Context, rootfs io.Reader, ref string, changes []string, _ string) error {
	data, err := io.ReadAll(rootfs)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.imports++
	if err != nil {
		return err // the engine discards a body that failed
	}
	f.imported = data
	labels := map[string]string{}
	for _, c := range changes {
		if kv, ok := strings.CutPrefix(c, "LABEL "); ok {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = v
		}
	}
	f.nextID++
	f.images[ref] = sandbox.Image{ID: "sha256:new" + string(rune('0'+f.nextID)), Size: int64(len(data)), Labels: labels}
	return nil
}

func (f *fakeEngine) RemoveImageIfUnused(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, id)
	return nil
}

func withLabels(id string, labels map[string]string) sandbox.Image {
	return sandbox.Image{ID: id, Labels: labels}
}

// fakeMmdebstrap puts a script named mmdebstrap first on PATH. It records
// its arguments, writes stdout and exits with code.
func fakeMmdebstrap(t *testing.T, stdout string, code int) (argsFile string) {
	t.Helper()
	dir := t.TempDir()
	argsFile = filepath.Join(dir, "args")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + argsFile + "\nprintf '" + stdout + "'\necho 'E: fake failure' >&2\nexit " + string(rune('0'+code)) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "mmdebstrap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return argsFile
}

func TestBuild(t *testing.T) {
	current := defaultRecipe("", nil).hash()
	tests := []struct {
		name        string
		existing    map[string]sandbox.Image
		force       bool
		script      string
		code        int
		wantImports int
		wantErr     string
		wantRemoved []string
		wantTagged  bool
	}{
		{name: "missing image is built", script: "rootfs", wantImports: 1, wantTagged: true},
		{
			name:     "current image is a no-op",
			existing: map[string]sandbox.Image{DefaultTag: withLabels("sha256:old", map[string]string{LabelRecipe: current})},
			script:   "rootfs", wantTagged: true,
		},
		{
			name:     "force rebuilds a current image",
			existing: map[string]sandbox.Image{DefaultTag: withLabels("sha256:old", map[string]string{LabelRecipe: current})},
			force:    true, script: "rootfs", wantImports: 1, wantTagged: true, wantRemoved: []string{"sha256:old"},
		},
		{
			name:     "changed recipe rebuilds",
			existing: map[string]sandbox.Image{DefaultTag: withLabels("sha256:old", map[string]string{LabelRecipe: "sha256:stale"})},
			script:   "rootfs", wantImports: 1, wantTagged: true, wantRemoved: []string{"sha256:old"},
		},
		{
			name:   "failed mmdebstrap tags nothing",
			script: "partial", code: 1, wantImports: 1,
			wantErr: "E: fake failure",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			argsFile := fakeMmdebstrap(t, tt.script, tt.code)
			eng := &fakeEngine{images: map[string]sandbox.Image{}}
			for k, v := range tt.existing {
				eng.images[k] = v
			}
			var progress bytes.Buffer
			err := Build(context.Background(), Options{Engine: eng, Force: tt.force, Progress: &progress, CacheDir: t.TempDir()})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Build error = %v, want it to contain %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if eng.imports != tt.wantImports {
				t.Errorf("imports = %d, want %d", eng.imports, tt.wantImports)
			}
			img, tagged := eng.images[DefaultTag]
			if tagged != tt.wantTagged {
				t.Fatalf("tagged = %v, want %v", tagged, tt.wantTagged)
			}
			if tagged && img.Labels[LabelRecipe] != current {
				t.Errorf("recipe label = %q, want %q", img.Labels[LabelRecipe], current)
			}
			if strings.Join(eng.removed, ",") != strings.Join(tt.wantRemoved, ",") {
				t.Errorf("removed = %v, want %v", eng.removed, tt.wantRemoved)
			}
			if tt.wantImports > 0 {
				if string(eng.imported) != tt.script && tt.code == 0 {
					t.Errorf("imported %q, want mmdebstrap's stdout %q", eng.imported, tt.script)
				}
				if !strings.Contains(progress.String(), "E: fake failure") {
					t.Errorf("progress did not receive mmdebstrap's stderr: %q", progress.String())
				}
				args, err := os.ReadFile(argsFile)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(args), "\n"+DefaultSuite+"\n-\n"+DefaultMirror+"\n") {
					t.Errorf("mmdebstrap args do not end with suite, stdout, mirror:\n%s", args)
				}
			}
		})
	}
}

func TestBuildEngineUnreachable(t *testing.T) {
	eng := &fakeEngine{images: map[string]sandbox.Image{}, inspErr: errors.New("dial unix /var/run/docker.sock: connection refused")}
	err := Build(context.Background(), Options{Engine: eng})
	if got := sandbox.KindOf(err); got != sandbox.ErrUnavailable {
		t.Fatalf("KindOf(%v) = %q, want %q", err, got, sandbox.ErrUnavailable)
	}
}

func TestRecipeHash(t *testing.T) {
	base := defaultRecipe("", nil)
	if base.hash() != defaultRecipe("http://mirror.example/debian", nil).hash() {
		t.Error("hash depends on the mirror")
	}
	mutations := map[string]func(*recipe){
		"suite":    func(r *recipe) { r.Suite = "bookworm" },
		"packages": func(r *recipe) { r.Packages = append(r.Packages, "jq") },
		"excludes": func(r *recipe) { r.Excludes = r.Excludes[1:] },
		"changes":  func(r *recipe) { r.Changes = append(r.Changes, "ENV X=1") },
		"boundary": func(r *recipe) {
			r.Packages = append(r.Packages[:len(r.Packages):len(r.Packages)], r.Excludes[0])
			r.Excludes = r.Excludes[1:]
		},
	}
	for name, mutate := range mutations {
		r := defaultRecipe("", nil)
		r.Packages = append([]string(nil), r.Packages...)
		mutate(&r)
		if r.hash() == base.hash() {
			t.Errorf("%s: hash unchanged", name)
		}
	}
}

func TestExtraPackages(t *testing.T) {
	base, extra := defaultRecipe("", nil), defaultRecipe("", []string{"libpq-dev"})
	if base.hash() == extra.hash() {
		t.Error("extra packages do not change the recipe hash")
	}
	args := strings.Join(extra.mmdebstrapArgs("/tmp/c.sh", "", ""), "\n")
	if !strings.Contains(args, ",curl,libpq-dev\n") {
		t.Errorf("extra package not installed:\n%s", args)
	}
	// An image built with the extras is current for a build with them, and
	// a build without them rebuilds it.
	eng := &fakeEngine{images: map[string]sandbox.Image{"team:base": {ID: "sha256:1", Labels: map[string]string{LabelRecipe: extra.hash()}}}}
	if err := Build(context.Background(), Options{Engine: eng, Tag: "team:base", Packages: []string{"libpq-dev"}}); err != nil || eng.imports != 0 {
		t.Errorf("build with the same extras: err %v, %d imports; want a no-op", err, eng.imports)
	}
}

func TestMmdebstrapArgsGolden(t *testing.T) {
	args := defaultRecipe("", nil).mmdebstrapArgs("/tmp/hook/customize.sh", "/var/cache/wrench/debs", eatmydataHooks)
	got := strings.Join(args, "\n") + "\n"
	golden := filepath.Join("testdata", "mmdebstrap-args.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("mmdebstrap args changed (run with -update if intended):\ngot:\n%s\nwant:\n%s", got, want)
	}
}

func TestDebCacheDir(t *testing.T) {
	if d, err := debCacheDir(Options{NoCache: true}); err != nil || d != "" {
		t.Errorf("NoCache: got %q, %v", d, err)
	}
	if _, err := debCacheDir(Options{CacheDir: "/tmp/with space"}); err == nil {
		t.Error("a cache dir with a space was accepted")
	}
}

// TestChangesSyntax checks the import instructions the way the engine
// parses them: an ENV value with a space must be quoted.
func TestChangesSyntax(t *testing.T) {
	env := regexp.MustCompile(`^ENV [A-Za-z_][A-Za-z0-9_]*=("[^"]*"|[^\s"]*)$`)
	for _, c := range defaultRecipe("", nil).changes("sha256:x") {
		verb, _, _ := strings.Cut(c, " ")
		switch verb {
		case "ENV":
			if !env.MatchString(c) {
				t.Errorf("%q: not one NAME=value pair (quote values with spaces)", c)
			}
		case "USER", "WORKDIR", "CMD", "LABEL":
		default:
			t.Errorf("%q: instruction not allowed in an import", c)
		}
	}
}

// TestImageUserIsTheSandboxUser: the image's user and home are the
// sandbox package's (sandbox.UID, sandbox.GID, sandbox.HomeDir), the one
// place the backend, the policy and the workspace's owner read them from.
func TestImageUserIsTheSandboxUser(t *testing.T) {
	r := defaultRecipe("", nil)
	for _, want := range []string{
		fmt.Sprintf("useradd --uid %d --user-group --create-home --shell /bin/bash %s", sandbox.UID, path.Base(sandbox.HomeDir)),
		fmt.Sprintf("chown %d:%d \"$root/workspace\"", sandbox.UID, sandbox.GID),
	} {
		if !strings.Contains(customizeScript, want) {
			t.Errorf("files/customize.sh lacks %q", want)
		}
	}
	if sandbox.GID != sandbox.UID {
		t.Errorf("useradd --user-group gives gid %d, sandbox.GID is %d", sandbox.UID, sandbox.GID)
	}
	if !slices.Contains(r.Changes, "USER "+sandbox.User()) || !slices.Contains(r.Changes, "ENV HOME="+sandbox.HomeDir) {
		t.Errorf("recipe changes %q lack the sandbox user or home", r.Changes)
	}
}
