// Package egress is the worker's audited way out of a sandbox: an HTTP
// forward proxy served on a unix socket that the sandbox backend mounts
// into the sandbox (see sandbox.Spec.EgressDir), so a sandbox with no
// network interface can still download what its setup needs, host by host,
// as the server policy allows.
//
// Inside the sandbox, the shim listens on 127.0.0.1:3128 (HTTP_PROXY) and
// hands each accepted connection's socket to the session over the unix
// socket (SCM_RIGHTS), so the proxy reads and writes the client's socket
// directly; where a socket cannot be passed (a runtime such as gVisor) the
// shim relays the bytes instead. Either way every decision, count and
// limit is the proxy's, on the host. A process may also speak HTTP on the
// unix socket itself.
//
// One [Session] serves one sandbox in one phase ("setup" or "agent"). It
// answers:
//
//   - CONNECT host:port (HTTPS, or any TLS): after the allowlist check, a
//     byte tunnel to the host. TLS is never intercepted.
//   - Plain-HTTP requests in absolute form (GET http://host/path): forwarded
//     to the host with hop-by-hop headers removed, bodies streamed both ways,
//     and the client's and the host's connections kept alive.
//
// Anything else gets a 400 that says what the proxy accepts. A host that no
// allowlist pattern matches (see policy.MatchHost) gets a 403 whose status
// line, X-Wrench-Egress header and body say which host, which phase, and
// that the server policy's egress allowlist decides; a failed dial gets a
// 502 with the reason.
//
// The proxy adds nothing to what it forwards (no credentials of the worker,
// no Via header, not even a User-Agent) and strips Proxy-Authorization
// sent from inside. Only a pattern naming a host exactly may reach a
// loopback, link-local, unspecified or multicast address (so "*" or
// "*.example.com" never reaches the worker's own services or a cloud
// metadata endpoint, whatever a name resolves to).
//
// Every tunnel and every forwarded request ends in one [Record] passed to
// SessionConfig.Audit (a denied one at once), with exact byte counts:
// tunnel payload for CONNECT, message bodies for forwarded requests. Host
// resources are bounded per session: concurrent connections, bytes per
// connection, bytes per session, header size, dial and idle timeouts.
// [Session.Close] closes every connection and waits for every goroutine;
// no Audit call happens after it returns.
package egress
