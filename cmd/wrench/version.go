package main

import (
	"runtime/debug"
	"strings"
)

// version is set at build time by the Makefile:
// -ldflags "-X main.version=$(git describe --tags --always --dirty)".
// Empty means buildVersion asks the binary's build information.
var version string

// buildVersion is the version `wrench version`, `--version`, the
// wrench_build_info metric and traces report: the -ldflags version when
// set, else the module version Go stamped (a tag, or a pseudo-version),
// else the VCS revision Go stamped ("devel-<12 hex>[-dirty]"), else
// "devel" (a build without VCS information, e.g. -buildvcs=false).
func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return versionFrom(bi)
}

// versionFrom reads the version out of build information.
func versionFrom(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	v := "devel-" + rev[:min(12, len(rev))]
	if dirty && !strings.HasSuffix(v, "-dirty") {
		v += "-dirty"
	}
	return v
}
