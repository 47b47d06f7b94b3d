# Wrench's own image: the static binary on scratch, run as uid/gid 1000 (the
# sandboxes' user). `make build` puts everything this file copies into bin/
# (the binary, built with CGO_ENABLED=0; the host's CA bundle; a skeleton
# with /tmp and the data directory), so after it
#   docker build -t wrench:dev .
# works; `make wrench-image` does both.
#
# The container starts sandboxes on a Docker engine, which resolves
# bind-mount sources on ITS host: mount the data directory at the same path
# on both sides, owned by uid 1000, and give the container the socket's
# group. docs/operations.md, "Compose", explains each part:
#   data=/var/lib/wrench
#   sudo install -d -o 1000 -g 1000 "$data"
#   docker run -d -v "$data:$data" -e WRENCH_DATA_DIR="$data" \
#     -v /var/run/docker.sock:/var/run/docker.sock --group-add "$(stat -c %g /var/run/docker.sock)" \
#     -e WRENCH_API_TOKEN -e WRENCH_POLICY -p 127.0.0.1:7070:7070 wrench:dev
# (the deploytest package's TestImageDockerRunLine runs these lines;
# WRENCH_POLICY, when set, names a policy file under "$data"). With
# the data directory anywhere else (a named volume), `wrench serve` refuses
# to start and says so; `wrench doctor` checks it too.
FROM scratch
COPY --chown=1000:1000 bin/rootfs/ /
COPY bin/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY bin/wrench /usr/local/bin/wrench
ENV WRENCH_DATA_DIR=/var/lib/wrench
USER 1000:1000
EXPOSE 7070
ENTRYPOINT ["/usr/local/bin/wrench"]
CMD ["serve", "--http", "0.0.0.0:7070"]
