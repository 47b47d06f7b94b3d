package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsCluster is a NATS cluster of `wrench nats-server` processes on
// loopback, each on fixed free ports so that a node restarted in place is
// found at the same URLs.
type natsCluster struct {
	t     testing.TB
	nodes []*natsNode
}

// natsNode is one node of a natsCluster.
type natsNode struct {
	name    string
	args    []string
	client  string // nats://127.0.0.1:port
	monitor string // http://127.0.0.1:port
	proc    *wrenchProc
}

// freePorts returns n distinct free loopback ports.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// startNATSCluster starts n clustered nodes and waits until each serves
// clients and the cluster has a JetStream meta leader; n = 1 is a single
// server, not clustered.
func startNATSCluster(t testing.TB, ctx context.Context, n int, extra ...string) *natsCluster {
	t.Helper()
	ports := freePorts(t, 3*n)
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[3*i+1]))
	}
	c := &natsCluster{t: t}
	dir := t.TempDir()
	for i := range n {
		node := &natsNode{name: fmt.Sprintf("n%d", i+1),
			client:  fmt.Sprintf("nats://127.0.0.1:%d", ports[3*i]),
			monitor: fmt.Sprintf("http://127.0.0.1:%d", ports[3*i+2])}
		node.args = []string{"nats-server", "--name", node.name,
			"--listen", strings.TrimPrefix(node.client, "nats://"),
			"--store-dir", filepath.Join(dir, node.name),
			"--monitor", strings.TrimPrefix(node.monitor, "http://")}
		if n > 1 {
			node.args = append(node.args, "--cluster-name", "wrench-test",
				"--cluster-listen", strings.TrimPrefix(routes[i], "nats://"), "--routes", strings.Join(routes, ","))
		}
		node.args = append(node.args, extra...)
		c.nodes = append(c.nodes, node)
	}
	for _, node := range c.nodes {
		c.start(ctx, node)
	}
	if n > 1 {
		c.waitLeader(ctx)
	}
	c.waitHealthy(ctx)
	return c
}

func (c *natsCluster) start(ctx context.Context, node *natsNode) {
	c.t.Helper()
	node.proc = startProc(c.t, node.name, node.args...)
	node.proc.line(c.t, ctx, "wrench nats-server: clients at ")
}

// urls is the comma-separated list of the nodes' client URLs.
func (c *natsCluster) urls() string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.client)
	}
	return strings.Join(out, ",")
}

// monitors is the comma-separated list of the nodes' monitoring URLs.
func (c *natsCluster) monitors() string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.monitor)
	}
	return strings.Join(out, ",")
}

// node returns the node named name.
func (c *natsCluster) node(name string) *natsNode {
	c.t.Helper()
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	c.t.Fatalf("no node %q", name)
	return nil
}

// jsz is the part of a node's /jsz that says who leads JetStream.
type jsz struct {
	Meta *struct {
		Leader      string `json:"leader"`
		ClusterSize int    `json:"cluster_size"`
	} `json:"meta_cluster"`
}

// status reads /jsz of the first live node that knows a meta leader.
func (c *natsCluster) status(ctx context.Context) (jsz, error) {
	var last error
	for _, n := range c.nodes {
		select {
		case <-n.proc.done:
			continue
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.monitor+"/jsz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err
			continue
		}
		var z jsz
		err = json.NewDecoder(resp.Body).Decode(&z)
		resp.Body.Close()
		if err == nil && z.Meta != nil && z.Meta.Leader != "" {
			return z, nil
		}
		last = fmt.Errorf("%s: no meta leader yet (%v)", n.name, err)
	}
	return jsz{}, last
}

// waitLeader waits until a live node reports a JetStream meta leader and
// returns it.
func (c *natsCluster) waitLeader(ctx context.Context) string {
	c.t.Helper()
	for {
		z, err := c.status(ctx)
		if err == nil {
			return z.Meta.Leader
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("no JetStream meta leader: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// streamLeader returns the node leading stream name, asking any node.
func (c *natsCluster) streamLeader(ctx context.Context, nc *nats.Conn, name string) (string, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	s, err := js.Stream(ctx, name)
	if err != nil {
		return "", err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return "", err
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return "", fmt.Errorf("stream %s has no leader", name)
	}
	return info.Cluster.Leader, nil
}

// moveLeader asks stream name's leader to hand leadership to node to, and
// waits until it has, for up to 30 s; it reports whether to leads. Each
// request is bounded by itself: one a loaded cluster leaves unanswered
// must not take the rest of ctx (it took a whole test's four minutes).
func (c *natsCluster) moveLeader(ctx context.Context, nc *nats.Conn, name, to string) bool {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		l, err := c.streamLeader(rctx, nc, name)
		if err == nil && l == to {
			rcancel()
			return true
		}
		body := fmt.Sprintf(`{"placement":{"preferred":%q}}`, to)
		_, _ = nc.RequestWithContext(rctx, "$JS.API.STREAM.LEADER.STEPDOWN."+name, []byte(body))
		rcancel()
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	return false
}

// waitCurrent waits until stream name has three or more replicas, all
// current.
func (c *natsCluster) waitCurrent(ctx context.Context, nc *nats.Conn, name string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := js.Stream(rctx, name)
		if err == nil {
			var info *jetstream.StreamInfo
			if info, err = s.Info(rctx); err == nil {
				err = replicasCurrent(info)
			}
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stream %s: %w", name, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func replicasCurrent(info *jetstream.StreamInfo) error {
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return errors.New("no leader")
	}
	if info.Config.Replicas < 3 {
		return fmt.Errorf("%d replicas configured", info.Config.Replicas)
	}
	if len(info.Cluster.Replicas) != info.Config.Replicas-1 {
		return fmt.Errorf("%d followers, want %d", len(info.Cluster.Replicas), info.Config.Replicas-1)
	}
	for _, r := range info.Cluster.Replicas {
		if !r.Current || r.Offline {
			return fmt.Errorf("replica %s not current", r.Name)
		}
	}
	return nil
}

// waitHealthy waits until every live node's /healthz answers 200: its
// JetStream is up and current with the cluster (a client creating streams
// sooner can time out on a loaded machine).
func (c *natsCluster) waitHealthy(ctx context.Context) {
	c.t.Helper()
	for _, n := range c.nodes {
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.monitor+"/healthz", nil)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case <-ctx.Done():
				c.t.Fatalf("%s never healthy: %v", n.name, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}
