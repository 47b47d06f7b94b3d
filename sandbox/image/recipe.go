package image

import (
	"crypto/sha256"
	_ "embed" // the customize hook script
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/wrenchworks/wrench/sandbox"
)

// DefaultMirror is the Debian mirror Build installs packages from.
const DefaultMirror = "http://deb.debian.org/debian"

// recipeVersion changes whenever the build steps change in a way the other
// hashed inputs would not show.
const recipeVersion = "4"

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

// DefaultSuite is the Debian release the default image is built from
// (trixie: Go 1.24, Python 3.13).
const DefaultSuite = "trixie"

// basePackages are the default image's packages: a shell and the usual
// tools, git, Go and Python with pytest, pip and venv, make and curl.
var basePackages = []string{
	"bash", "coreutils", "findutils", "grep", "sed", "diffutils", "patch", "procps",
	"git", "python3", "python3-pytest", "python3-pip", "python3-venv", "ca-certificates",
	"golang-go", "make", "curl",
}

func defaultRecipe(mirror string, extra []string) recipe {
	if mirror == "" {
		mirror = DefaultMirror
	}
	return recipe{
		Suite:    DefaultSuite,
		Mirror:   mirror,
		Packages: append(append([]string(nil), basePackages...), extra...),
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
			"ENV PATH=" + sandbox.HomeDir + "/.local/bin:" + sandbox.HomeDir + "/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"ENV HOME=" + sandbox.HomeDir,
			"ENV LANG=C.UTF-8",
			"ENV CGO_ENABLED=0",
			// Caches and modules live in the home directory, so an
			// environment snapshot keeps what setup downloaded and built.
			"ENV GOCACHE=" + sandbox.HomeDir + "/.cache/go-build",
			"ENV GOPATH=" + sandbox.HomeDir + "/go",
			"ENV GOFLAGS=-modcacherw",
			// A go.mod's go and toolchain lines are honoured: a newer Go
			// comes from the module proxy (golang.org/toolchain) during
			// setup and stays in the snapshot's module cache.
			"ENV GOTOOLCHAIN=auto",
			// pip installs for the sandbox user (~/.local) on a Debian
			// that marks its Python as externally managed.
			"ENV PIP_BREAK_SYSTEM_PACKAGES=1",
			"ENV WRENCH_GOCACHE_SEED=" + GoCacheSeed,
			// Keep test runs from leaving caches in the workspace, where
			// they would end up in the task's diff.
			"ENV PYTHONDONTWRITEBYTECODE=1",
			`ENV PYTEST_ADDOPTS="-p no:cacheprovider"`,
			"USER " + sandbox.User(),
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
