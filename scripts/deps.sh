#!/usr/bin/env bash
# Installs the Debian packages Wrench's tests need, when they are missing.
set -euo pipefail
need=()
command -v nats-server >/dev/null || need+=(nats-server)
command -v promtool >/dev/null || need+=(prometheus)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v git >/dev/null || need+=(git)
# The Compose file's end-to-end test needs a compose tool.
command -v docker-compose >/dev/null || docker compose version >/dev/null 2>&1 || need+=(docker-compose)
# etcd for the kube-apiserver the chart tests start (make k8s-tools builds
# the apiserver itself).
command -v etcd >/dev/null || need+=(etcd-server)
# A static busybox is the tiny test image of the sandbox tests.
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "missing: ${need[*]} — install them with your package manager (Debian: apt-get install ${need[*]}); tests that need them skip with a note" >&2
  # Under CI nothing may skip, so a missing tool is an error there.
  [ "${CI:-}" = true ] && exit 1
  exit 0
fi
echo "installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
