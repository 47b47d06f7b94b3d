package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"

	"github.com/wrenchworks/wrench/policy"
)

// target is the host:port of a request, normalised (lower case, port
// always present, IPv6 in brackets).
func target(host, defaultPort string) (string, error) {
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		if defaultPort == "" || strings.Contains(host, "]:") {
			return "", fmt.Errorf("%q is not host:port", host)
		}
		h, port = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), defaultPort
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%q: bad port", host)
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" || strings.ContainsAny(h, " /\\@") {
		return "", fmt.Errorf("%q: bad host", host)
	}
	return net.JoinHostPort(h, port), nil
}

// rule returns the first allowlist pattern that matches hostport, or "".
func (s *Session) rule(hostport string) string {
	for _, p := range s.current().allow {
		if policy.MatchHost([]string{p}, hostport) {
			return p
		}
	}
	return ""
}

// internalError refuses a dial to an address that only an exact pattern
// may reach.
type internalError struct {
	addr netip.Addr
	kind string
}

func (e *internalError) Error() string {
	return fmt.Sprintf("it resolves to %s, a %s address, which only an allowlist entry naming the host exactly may reach", e.addr, e.kind)
}

// internalKind names the class of an address a wildcard must not reach.
func internalKind(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	}
	return ""
}

// dial connects to hostport for a request the pattern rule allowed. The
// address is checked as the socket connects, so a name resolving (or
// re-resolving) to an internal address is refused unless rule names the
// host exactly.
func (s *Session) dial(ctx context.Context, hostport, rule string) (net.Conn, error) {
	wildcard := strings.Contains(rule, "*")
	d := &net.Dialer{Timeout: s.cfg.DialTimeout}
	d.ControlContext = func(_ context.Context, _, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		if k := internalKind(ap.Addr()); k != "" && wildcard {
			return &internalError{addr: ap.Addr().Unmap(), kind: k}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel) // Close cancels a dial in progress
	defer stop()
	c, err := d.DialContext(ctx, "tcp", hostport)
	if err != nil {
		return nil, err
	}
	if !s.track(c) {
		return nil, errors.New("the egress session closed")
	}
	return c, nil
}
