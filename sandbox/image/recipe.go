package image

import (
	"crypto/sha256"
	_ "embed" // the customize hook script
	"encoding/hex"
	"fmt"
	"strings"
)

// DefaultMirror is the Debian mirror Build installs packages from.
const DefaultMirror = "http://deb.debian.org/debian"

// recipeVersion changes whenever the build steps change in a way the other
// hashed inputs would not show.
const recipeVersion = "3"

//go:embed files/customize.sh
var customizeScript string

// recipe is everything that decides what the image contains.
type recipe struct {
	Suite    string
	Mirror   string
	Packages []string
	// Excludes are dpkg path-exclude globs: files never unpacked.
	Excludes []string
	// Includes are dpkg path-include globs that re-admit excluded files.
	Includes []string
	// Changes are the Dockerfile-style instructions given to the import.
	Changes []string
}

func defaultRecipe(mirror string) recipe {
	if mirror == "" {
		mirror = DefaultMirror
	}
	return recipe{
		Suite:  "bookworm",
		Mirror: mirror,
		Packages: []string{
			"bash", "coreutils", "findutils", "grep", "sed", "diffutils", "patch",
			"git", "python3", "python3-pytest", "ca-certificates", "golang-go",
		},
		Excludes: []string{
			"/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*",
			"/usr/share/doc/*", "/usr/share/lintian/*",
			// Go: the toolchain's own tests, API lists, the sources and
			// compiled packages of the commands (their binaries stay).
			"/usr/share/go-*/test/*", "/usr/share/go-*/api/*",
			"/usr/share/go-*/src/cmd/*", "/usr/share/go-*/src/*/testdata/*",
			"/usr/lib/go-*/pkg/linux_*/cmd/*",
		},
		Includes: []string{"/usr/share/doc/*/copyright"},
		Changes: []string{
			"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"ENV HOME=/home/wrench",
			"ENV LANG=C.UTF-8",
			"ENV CGO_ENABLED=0",
			"ENV GOCACHE=/tmp/gocache",
			"ENV GOPATH=/tmp/go",
			"ENV GOFLAGS=-modcacherw",
			"ENV WRENCH_GOCACHE_SEED=" + GoCacheSeed,
			// Keep test runs from leaving caches in the workspace, where
			// they would end up in the task's diff.
			"ENV PYTHONDONTWRITEBYTECODE=1",
			`ENV PYTEST_ADDOPTS="-p no:cacheprovider"`,
			"USER 1000:1000",
			"WORKDIR /workspace",
			`CMD ["bash"]`,
			"LABEL " + LabelImage + "=sandbox",
		},
	}
}

// hash identifies the recipe's content; the mirror is not part of it.
func (r recipe) hash() string {
	h := sha256.New()
	fmt.Fprintf(h, "version %s\nsuite %s\n", recipeVersion, r.Suite)
	for _, list := range [][]string{r.Packages, r.Excludes, r.Includes, r.Changes, {customizeScript}} {
		fmt.Fprintf(h, "%d\n", len(list))
		for _, s := range list {
			fmt.Fprintf(h, "%d:%s\n", len(s), s)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// changes are the import instructions, with the recipe label added.
func (r recipe) changes(hash string) []string {
	return append(append([]string(nil), r.Changes...), "LABEL "+LabelRecipe+"="+hash)
}

// eatmydataHooks is mmdebstrap's hook directory that turns off fsync while
// packages are installed (a large part of the build time); it is used
// when present.
const eatmydataHooks = "/usr/share/mmdebstrap/hooks/eatmydata"

// mmdebstrapArgs returns the arguments that write the root file system as
// a tarball to stdout. scriptPath is the customize hook on the host;
// cacheDir, when not empty, keeps .deb files between builds; hookDir, when
// not empty, is an extra mmdebstrap hook directory.
func (r recipe) mmdebstrapArgs(scriptPath, cacheDir, hookDir string) []string {
	args := []string{
		"--variant=minbase",
		"--format=tar",
		"--include=" + strings.Join(r.Packages, ","),
	}
	if hookDir != "" {
		args = append(args, "--hook-dir="+hookDir)
	}
	for _, e := range r.Excludes {
		args = append(args, "--dpkgopt=path-exclude="+e)
	}
	for _, i := range r.Includes {
		args = append(args, "--dpkgopt=path-include="+i)
	}
	if cacheDir != "" {
		q := shellQuote(cacheDir)
		args = append(args,
			// Keep the essential packages' .debs so they reach the cache.
			"--skip=essential/unlink",
			`--setup-hook=mkdir -p "$1"/var/cache/apt/archives/`,
			"--setup-hook=sync-in "+cacheDir+" /var/cache/apt/archives/",
			"--customize-hook=rm -f "+q+"/*.deb",
			"--customize-hook=sync-out /var/cache/apt/archives "+cacheDir,
		)
	}
	args = append(args,
		"--customize-hook=sh "+shellQuote(scriptPath)+` "$1"`,
		r.Suite, "-", r.Mirror,
	)
	return args
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
