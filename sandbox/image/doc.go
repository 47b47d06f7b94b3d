// Package image builds Wrench's default sandbox image on a machine that has
// a Docker engine and Debian's package mirrors but no container registry.
//
// [Build] runs mmdebstrap (variant minbase) to produce a root file system
// with bash, coreutils, git, python3 with pytest, and Debian's Go toolchain,
// streams it as a tarball straight into the engine's image import, and tags
// the result ([DefaultTag] unless told otherwise). The image runs as the
// unprivileged user wrench (uid and gid 1000) in /workspace.
//
// The image carries a label with a hash of its recipe ([LabelRecipe]). A
// second [Build] with the same recipe is a no-op; a changed recipe, or
// [Options.Force], rebuilds it.
//
// # Go build cache
//
// A first `go test` in an empty build cache spends seconds compiling and
// vetting the standard library. The image avoids that twice over:
//
//   - The standard library is rebuilt for CGO_ENABLED=0 (the image has no C
//     compiler) and installed into GOROOT, which is read-only and shared.
//   - A pre-built, read-only build cache at [GoCacheSeed] holds the test
//     dependencies and vet facts of the commonly used standard packages.
//     The `go` on PATH (/usr/local/bin/go) is a small wrapper: the first
//     time it runs in a sandbox and $GOCACHE does not exist yet, it copies
//     the seed there, then runs the real go. The image sets GOCACHE to
//     ~/.cache/go-build (/tmp/gocache when unset): in a writable-root
//     sandbox that is the container's own layer, so an environment
//     snapshot keeps what setup compiled, and a sandbox with a tmpfs home
//     keeps it in that tmpfs. Either way each sandbox writes only to its
//     own copy, and nothing one task compiles reaches another task's cache.
//
// Setting WRENCH_GOCACHE_SEED to the empty string in a sandbox's
// environment turns the seeding off (the benchmark's empty-cache case).
//
// The sandbox must mount /tmp as a writable tmpfs with exec allowed (Go
// runs test binaries from GOTMPDIR, which defaults to /tmp).
package image
