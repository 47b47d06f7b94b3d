#!/usr/bin/env bash
# Builds the Kubernetes tools the chart tests use — helm, kube-apiserver and
# kubectl — from the Go module proxy, once, into a cache directory keyed by
# version that later runs reuse:
#   ${WRENCH_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/wrench-tools}/<tool>-<version>/<tool>
# Prints the directory holding the three binaries' version directories.
# `k8s-tools.sh paths` builds nothing: it prints helm=PATH,
# kube-apiserver=PATH and kubectl=PATH when all are built, and exits 3 when
# one is missing (the deploytest package asks it where the tools are).
# etcd comes from Debian's etcd-server (scripts/deps.sh).
#
# Cold, on a 2-core machine, helm takes about 10 minutes and kube-apiserver
# with kubectl about 6; a warm cache takes no time. Set WRENCH_TOOLS_DIR to
# share a cache between checkouts or CI runs.
set -euo pipefail
HELM_VERSION=${HELM_VERSION:-v3.22.0}
KUBE_VERSION=${KUBE_VERSION:-v1.35.4}
dir=${WRENCH_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/wrench-tools}
GO=${GO:-go}
export CGO_ENABLED=0 GOFLAGS=-mod=mod

log() { echo "k8s-tools: $*" >&2; }

# One build at a time per cache directory (checkouts may share it).
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9

# build_helm installs helm at HELM_VERSION with go install.
build_helm() {
  local out=$dir/helm-$HELM_VERSION
  [ -x "$out/helm" ] && return
  log "building helm $HELM_VERSION (about 10 minutes cold on 2 cores)"
  local start=$SECONDS
  mkdir -p "$out.tmp"
  GOBIN=$out.tmp $GO install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  rm -rf "$out" && mv "$out.tmp" "$out"
  log "helm built in $((SECONDS - start))s"
}

# build_kube builds kube-apiserver and kubectl at KUBE_VERSION. The
# k8s.io/kubernetes module requires its staging modules at v0.0.0, so a
# throwaway module replaces each with its published v0.X.Y.
build_kube() {
  local out=$dir/kube-$KUBE_VERSION
  [ -x "$out/kube-apiserver" ] && [ -x "$out/kubectl" ] && return
  log "building kube-apiserver and kubectl $KUBE_VERSION (about 6 minutes cold on 2 cores)"
  local start=$SECONDS
  local mod
  mod=$(mktemp -d)
  trap 'rm -rf "$mod"' RETURN
  local staging=v0.${KUBE_VERSION#v1.}
  (
    cd "$mod"
    $GO mod init wrench-kube-tools >/dev/null 2>&1
    # The staging modules named in the kubernetes go.mod (replaced by
    # ./staging/... there).
    local gomod
    gomod=$($GO mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    local m
    for m in $(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$gomod"); do
      $GO mod edit -replace "$m=$m@$staging"
    done
    $GO mod edit -require "k8s.io/kubernetes@$KUBE_VERSION"
    cat >tools.go <<'EOF'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
EOF
    $GO mod tidy -e >/dev/null 2>&1 || true
    $GO get "k8s.io/kubernetes@$KUBE_VERSION" >/dev/null 2>&1
    mkdir -p "$out.tmp"
    # The version the binaries report (helm checks a chart's kubeVersion
    # against the server's), as the Kubernetes release build stamps it.
    local v=k8s.io/component-base/version minor=${KUBE_VERSION#v1.}
    minor=${minor%%.*}
    $GO build -trimpath -ldflags "-X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean" \
      -o "$out.tmp/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
  )
  rm -rf "$out" && mv "$out.tmp" "$out"
  log "kube-apiserver and kubectl built in $((SECONDS - start))s"
}

paths() {
  local h=$dir/helm-$HELM_VERSION/helm k=$dir/kube-$KUBE_VERSION
  [ -x "$h" ] && [ -x "$k/kube-apiserver" ] && [ -x "$k/kubectl" ] || exit 3
  printf 'helm=%s\nkube-apiserver=%s\nkubectl=%s\n' "$h" "$k/kube-apiserver" "$k/kubectl"
  exit 0
}

[ "${1:-}" = paths ] && paths
mkdir -p "$dir"
case "${1:-all}" in
helm) build_helm ;;
kube) build_kube ;;
all) build_helm; build_kube ;;
*) echo "usage: $0 [helm|kube|all|paths]" >&2; exit 2 ;;
esac
echo "$dir"
