package environment

import (
	"reflect"
	"testing"

	"github.com/wrenchworks/wrench/policy"
)

func TestMatchManifests(t *testing.T) {
	files := map[string]string{
		"go.mod": "a", "go.sum": "b", "main.go": "c",
		"tools/go.mod":                    "d",
		"vendor/x/go.mod":                 "e",
		"web/package.json":                "f",
		"web/node_modules/p/package.json": "g",
		"requirements-dev.txt":            "h",
		"internal/testdata/go.mod":        "i",
		"deps/pinned.lock":                "j",
		".wrench.yaml":                    "k",
	}
	got := MatchManifests(files, []string{"deps/*.lock"})
	want := []string{".wrench.yaml", "deps/pinned.lock", "go.mod", "go.sum", "requirements-dev.txt", "tools/go.mod", "web/package.json"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

func TestKey(t *testing.T) {
	base := func() KeyInput {
		return KeyInput{
			BaseImageID: "sha256:aaa",
			Config:      &policy.Effective{Setup: []string{"go mod download"}, Env: map[string]string{"A": "1"}},
			Files:       map[string]string{"go.mod": "m1", "go.sum": "s1", "main.go": "x1"},
		}
	}
	k0, manifests := Key(base())
	if !reflect.DeepEqual(manifests, []string{"go.mod", "go.sum"}) {
		t.Errorf("manifests %v", manifests)
	}
	same := base()
	same.Files["main.go"] = "x2" // source changes do not change the environment
	if k, _ := Key(same); k != k0 {
		t.Error("a source file changed the key")
	}
	changes := map[string]func(*KeyInput){
		"lockfile":     func(in *KeyInput) { in.Files["go.sum"] = "s2" },
		"new manifest": func(in *KeyInput) { in.Files["sub/go.mod"] = "m9" },
		"base image":   func(in *KeyInput) { in.BaseImageID = "sha256:bbb" },
		"setup":        func(in *KeyInput) { in.Config.Setup = []string{"go mod download", "go build ./..."} },
		"env":          func(in *KeyInput) { in.Config.Env = map[string]string{"A": "2"} },
		"packages":     func(in *KeyInput) { in.Config.Packages = []string{"libpq-dev"} },
		"user":         func(in *KeyInput) { in.Config.SetupUser = "root" },
		"egress":       func(in *KeyInput) { in.Config.SetupEgress = []string{"example.com"} },
		"secrets":      func(in *KeyInput) { in.Config.SecretNames = []string{"NPM_TOKEN"} },
	}
	for name, mutate := range changes {
		in := base()
		mutate(&in)
		if k, _ := Key(in); k == k0 {
			t.Errorf("%s did not change the key", name)
		}
	}
}
