#!/bin/sh
# Prepares a wrench pod's Docker engine and data directory, before wrench
# starts. Environment: DOCKER_HOST, WRENCH_DATA_DIR, WRENCH_IMAGE,
# SANDBOX_IMAGE, PULL (true|false); optional WRENCH_UID/WRENCH_GID (1000)
# and ENGINE_WAIT (seconds, 180).
#
# The engine bind-mounts the wrench binary into every sandbox (the
# in-sandbox helper) from the path the wrench process runs from, and it
# resolves that path in its own file system. So wrench runs from a copy in
# the data directory, which the pod and the engine mount at the same path.
set -eu

: "${WRENCH_DATA_DIR:?}" "${WRENCH_IMAGE:?}" "${SANDBOX_IMAGE:?}"
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

if [ "${PULL:-true}" = true ]; then
	docker pull -q "$WRENCH_IMAGE" >/dev/null
	docker pull -q "$SANDBOX_IMAGE" >/dev/null
fi
if ! docker image inspect "$SANDBOX_IMAGE" >/dev/null 2>&1; then
	echo "bootstrap: the sandbox image $SANDBOX_IMAGE is not in the engine (push it to a registry the engine can pull from, or load it on the node and set docker.bootstrap.pull=false)" >&2
	exit 1
fi

mkdir -p "$WRENCH_DATA_DIR/bin"
id=$(docker create "$WRENCH_IMAGE")
trap 'docker rm -f "$id" >/dev/null 2>&1 || true' EXIT
docker cp "$id:/usr/local/bin/wrench" "$WRENCH_DATA_DIR/bin/wrench.new"
chmod 0755 "$WRENCH_DATA_DIR/bin/wrench.new"
mv -f "$WRENCH_DATA_DIR/bin/wrench.new" "$WRENCH_DATA_DIR/bin/wrench"
chown "$uid:$gid" "$WRENCH_DATA_DIR" "$WRENCH_DATA_DIR/bin" "$WRENCH_DATA_DIR/bin/wrench"
echo "bootstrap: engine ready, $SANDBOX_IMAGE present, wrench binary at $WRENCH_DATA_DIR/bin/wrench"
