#!/bin/sh
# mmdebstrap customize hook for the Wrench sandbox image. It runs on the
# build host; $1 is the root of the new file system. Everything that runs
# inside the new root goes through chroot with a clean environment.
set -eu
root="$1"
in_root() {
	chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"
}

# The unprivileged user every command runs as.
in_root useradd --uid 1000 --user-group --create-home --shell /bin/bash wrench
mkdir -p "$root/workspace" "$root/opt/wrench"
chown 1000:1000 "$root/workspace"

# git must accept a /workspace owned by whoever cloned it on the host, and
# commit without asking who is committing.
cat > "$root/etc/gitconfig" <<'GITCONFIG'
[safe]
	directory = *
[user]
	name = Wrench Sandbox
	email = sandbox@wrench.invalid
[init]
	defaultBranch = main
[advice]
	detachedHead = false
GITCONFIG

# Rebuild the standard library for CGO_ENABLED=0 (there is no C compiler in
# the image) into GOROOT itself, read-only and shared by every sandbox.
goroot=$(in_root go env GOROOT)
in_root env CGO_ENABLED=0 GOCACHE=/tmp/wrench-install-cache GOFLAGS= go install std

# `go` on PATH is a wrapper that gives each sandbox its own writable build
# cache, seeded from the read-only one built below, on first use.
cat > "$root/usr/local/bin/go" <<WRAPPER
#!/bin/sh
# Wrench: seed this sandbox's private GOCACHE from the image's pre-built,
# read-only cache the first time go runs, then run the real go.
seed="\${WRENCH_GOCACHE_SEED-/opt/wrench/gocache}"
cache="\${GOCACHE:-/tmp/gocache}"
if [ -n "\$seed" ] && [ -d "\$seed" ] && [ ! -e "\$cache" ]; then
	tmp="\$cache.seed.\$\$"
	if mkdir -p "\$(dirname "\$cache")" && cp -r "\$seed" "\$tmp" 2>/dev/null; then
		mv -T "\$tmp" "\$cache" 2>/dev/null || rm -rf "\$tmp"
	else
		rm -rf "\$tmp"
	fi
fi
exec $goroot/bin/go "\$@"
WRAPPER
chmod 0755 "$root/usr/local/bin/go"

# The pre-built cache: test a module importing the commonly used standard
# packages, which leaves their compiled test dependencies and vet facts in
# the cache.
seed="$root/tmp/wrench-seed"
mkdir -p "$seed"
cat > "$seed/go.mod" <<'GOMOD'
module wrench.invalid/gocacheseed

go 1.19
GOMOD
{
	echo 'package seed'
	echo
	echo 'import ('
	for p in bufio bytes context crypto/sha256 encoding/json errors flag fmt \
		io io/fs log math net/http net/http/httptest os os/exec path/filepath \
		reflect regexp sort strconv strings sync testing time unicode; do
		echo "	_ \"$p\""
	done
	echo ')'
} > "$seed/seed.go"
printf 'package seed\n\nimport "testing"\n\nfunc TestSeed(t *testing.T) {}\n' > "$seed/seed_test.go"
in_root sh -c 'cd /tmp/wrench-seed && CGO_ENABLED=0 GOCACHE=/opt/wrench/gocache GOFLAGS= GOPROXY=off go test ./... >/dev/null'
chmod -R a+rX "$root/opt/wrench"

# Leave nothing behind that the image does not need.
rm -rf "$seed" "$root/tmp/wrench-install-cache" "$root/root/.cache" "$root/root/go"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/*.log \
	"$root"/var/cache/debconf/*-old "$root"/var/lib/dpkg/*-old
