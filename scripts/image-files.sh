#!/usr/bin/env bash
# Puts next to bin/wrench what the Dockerfile copies besides it: the host's
# CA bundle (the image is FROM scratch, and the model endpoint and git
# hosts speak TLS) and bin/rootfs, a skeleton root with a world-writable
# /tmp and the data directory /var/lib/wrench (owned by uid 1000 in the
# image through COPY --chown).
set -euo pipefail
bin=${1:-bin}
mkdir -p "$bin/rootfs/tmp" "$bin/rootfs/var/lib/wrench"
chmod 1777 "$bin/rootfs/tmp"
chmod 0755 "$bin/rootfs/var/lib/wrench"
for ca in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/cert.pem; do
  if [ -f "$ca" ]; then
    cp "$ca" "$bin/ca-certificates.crt"
    exit 0
  fi
done
echo "image-files: no CA bundle found (looked for /etc/ssl/certs/ca-certificates.crt and others); put one at $bin/ca-certificates.crt before docker build" >&2
