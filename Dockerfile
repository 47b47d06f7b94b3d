# Wrench's own image: the static binary on scratch. Build the binary first
# (`make build`, CGO_ENABLED=0) and put a CA bundle next to it
# (`cp /etc/ssl/certs/ca-certificates.crt bin/`), then
#   docker build -t wrench:dev .
# The container needs the host's Docker socket to start sandboxes:
#   docker run -v /var/run/docker.sock:/var/run/docker.sock -p 7070:7070 wrench:dev serve --http 0.0.0.0:7070 --token …
FROM scratch
COPY bin/wrench /usr/local/bin/wrench
COPY bin/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV WRENCH_DATA_DIR=/var/lib/wrench
VOLUME /var/lib/wrench
EXPOSE 7070
ENTRYPOINT ["/usr/local/bin/wrench"]
CMD ["serve", "--http", "0.0.0.0:7070"]
