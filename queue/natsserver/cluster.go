package natsserver

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// ErrInsecureRoutes is returned by [Start] for a cluster listener beyond
// loopback: routes between servers are neither authenticated nor
// encrypted here.
var ErrInsecureRoutes = errors.New("cluster routes beyond loopback are not authenticated: listen for routes on loopback, or run nats-server with route TLS")

// Cluster makes the server one node of a NATS cluster with clustered
// JetStream (R3 streams need three nodes).
type Cluster struct {
	// Name of the cluster; every node gives the same.
	Name string
	// Listen is the route address "host:port" other nodes dial; loopback
	// only ([ErrInsecureRoutes]).
	Listen string
	// Routes are the other nodes' route URLs (nats://host:port); listing
	// this node's own is harmless.
	Routes []string
}

// apply sets the cluster options of a server named name.
func (c *Cluster) apply(name string, opts *server.Options) error {
	if c.Name == "" || name == "" {
		return errors.New("start nats: a cluster node needs a cluster name and a server name")
	}
	host, port, err := splitListen(c.Listen)
	if err != nil {
		return err
	}
	if !isLoopback(host) {
		return fmt.Errorf("start nats: cluster listen %s: %w", c.Listen, ErrInsecureRoutes)
	}
	opts.Cluster.Name, opts.Cluster.Host, opts.Cluster.Port = c.Name, host, port
	for _, r := range c.Routes {
		u, err := url.Parse(strings.TrimSpace(r))
		if err != nil || u.Scheme != "nats" || u.Host == "" {
			return fmt.Errorf("start nats: route %q is not a nats://host:port URL", r)
		}
		opts.Routes = append(opts.Routes, u)
	}
	return nil
}
