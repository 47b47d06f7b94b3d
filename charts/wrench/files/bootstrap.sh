#!/bin/sh
# Prepares a wrench pod's Docker engine and data directory, before wrench
# starts. Environment: DOCKER_HOST, WRENCH_DATA_DIR, SANDBOX_IMAGE, PULL
# (true|false); optional PULL_SECRETS (a directory holding one directory per
# image pull secret, each with the secret's .dockerconfigjson as
# config.json), QUEUE_DIR (where the all-in-one queue's claim is mounted,
# when it is mounted below the node's directory), WRENCH_UID/WRENCH_GID
# (1000) and ENGINE_WAIT (seconds, 180).
#
# 1. Wait for the engine.
# 2. Pull the sandbox image into it (PULL=true) with the pod's image pull
#    secrets, tried in turn, then without credentials. A reference that
#    names no registry (wrench-sandbox:default) is never pulled: it would
#    come from Docker Hub, where anyone can publish under that name.
# 3. Refuse to go on without the sandbox image.
# 4. Give the data directory to wrench's user (hostSocket mode makes it on
#    the node as root). wrench copies its own binary into it at start.
set -eu

: "${WRENCH_DATA_DIR:?}" "${SANDBOX_IMAGE:?}"
uid=${WRENCH_UID:-1000}
gid=${WRENCH_GID:-1000}
wait=${ENGINE_WAIT:-180}

n=0
until docker version >/dev/null 2>&1; do
	n=$((n + 1))
	if [ "$n" -gt "$wait" ]; then
		echo "bootstrap: no Docker engine answers at ${DOCKER_HOST:-the default socket} after ${wait}s" >&2
		docker version >&2 || true
		exit 1
	fi
	sleep 1
done

# has_registry: whether an image reference starts with a registry host
# (a first component with a dot or a port, or localhost), as Docker reads it.
has_registry() {
	case "$1" in
	*/*) first=${1%%/*} ;;
	*) return 1 ;;
	esac
	case "$first" in
	*.* | *:* | localhost) return 0 ;;
	esac
	return 1
}

pull() {
	if [ -n "${PULL_SECRETS:-}" ] && [ -d "$PULL_SECRETS" ]; then
		for d in "$PULL_SECRETS"/*/; do
			[ -f "${d}config.json" ] || continue
			if DOCKER_CONFIG=$d docker pull -q "$1" >/dev/null 2>&1; then
				echo "bootstrap: pulled $1 with the pull secret in $d"
				return 0
			fi
		done
	fi
	docker pull -q "$1" >/dev/null
}

if [ "${PULL:-true}" = true ]; then
	if ! has_registry "$SANDBOX_IMAGE"; then
		echo "bootstrap: not pulling $SANDBOX_IMAGE: it names no registry, and Wrench never pulls from Docker Hub by default" >&2
	elif ! pull "$SANDBOX_IMAGE"; then
		echo "bootstrap: pulling $SANDBOX_IMAGE failed (with each of the pod's imagePullSecrets, and without credentials)" >&2
		exit 1
	fi
fi
if ! docker image inspect "$SANDBOX_IMAGE" >/dev/null 2>&1; then
	echo "bootstrap: the sandbox image $SANDBOX_IMAGE is not in the engine: set sandbox.image to a reference in a registry the engine can pull from (with imagePullSecrets when it needs credentials), or load it into the node's engine and set docker.bootstrap.pull=false" >&2
	exit 1
fi

mkdir -p "$WRENCH_DATA_DIR"
chown "$uid:$gid" "$WRENCH_DATA_DIR"
if [ -n "${QUEUE_DIR:-}" ]; then
	# The claim's nats/ is the embedded NATS's store (mounted with subPath).
	mkdir -p "$QUEUE_DIR/nats"
	chown "$uid:$gid" "$QUEUE_DIR/nats"
fi
echo "bootstrap: engine ready, $SANDBOX_IMAGE present, $WRENCH_DATA_DIR ready for uid $uid"
