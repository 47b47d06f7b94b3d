package chaos

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/queue"
)

// clusterQueue is three NATS servers of Wrench's own version (`wrench
// nats-server`) clustered on loopback, every stream and bucket with three
// replicas (`--replicas 3`).
type clusterQueue struct {
	nodes    []*Proc
	clients  []string // nats://host:port of each node
	monitors []string // http://host:port of each node's monitoring
}

// newClusterQueue describes the three nodes; Start runs them.
func newClusterQueue(bin, dir string) (*clusterQueue, error) {
	q := &clusterQueue{}
	var routes []string
	type addrs struct{ client, route, monitor string }
	var all []addrs
	for range 3 {
		var a [3]string
		for j := range a {
			var err error
			if a[j], err = freeAddr(); err != nil {
				return nil, err
			}
		}
		all = append(all, addrs{a[0], a[1], a[2]})
		routes = append(routes, "nats://"+a[1])
	}
	for i, a := range all {
		name := fmt.Sprintf("nats-%d", i+1)
		args := []string{"nats-server", "--name", name, "--listen", a.client, "--cluster-name", "wrench-chaos",
			"--cluster-listen", a.route, "--routes", strings.Join(routes, ","),
			"--store-dir", filepath.Join(dir, name), "--monitor", a.monitor, "--sync", "always"}
		q.nodes = append(q.nodes, newProc(name, bin, filepath.Join(dir, name+".log"), nil, args...))
		q.clients = append(q.clients, "nats://"+a.client)
		q.monitors = append(q.monitors, "http://"+a.monitor)
	}
	return q, nil
}

func (q *clusterQueue) Kind() string { return "three clustered NATS nodes (wrench nats-server, R3)" }

func (q *clusterQueue) Start(ctx context.Context) error {
	for _, n := range q.nodes {
		if err := n.Start(); err != nil {
			return err
		}
	}
	for i := range q.nodes {
		if err := q.await(ctx, i); err != nil {
			return err
		}
	}
	return q.awaitJetStream(ctx)
}

func (q *clusterQueue) url() string { return strings.Join(q.clients, ",") }

func (q *clusterQueue) ServeArgs() []string                 { return q.args() }
func (q *clusterQueue) WorkerArgs() []string                { return q.args() }
func (q *clusterQueue) Joined(context.Context, *Proc) error { return nil }
func (q *clusterQueue) Nodes() []*Proc                      { return q.nodes }

// args join the cluster, with three replicas, reading the nodes' sync
// setting from their monitoring.
func (q *clusterQueue) args() []string {
	return []string{"--nats", q.url(), "--replicas", "3", "--nats-monitor", strings.Join(q.monitors, ",")}
}

func (q *clusterQueue) Restart(ctx context.Context, node *Proc) error {
	if err := node.Start(); err != nil {
		return err
	}
	for i, n := range q.nodes {
		if n == node {
			return q.await(ctx, i)
		}
	}
	return nil
}

// await waits until node i accepts connections.
func (q *clusterQueue) await(ctx context.Context, i int) error {
	addr := strings.TrimPrefix(q.clients[i], "nats://")
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s does not listen on %s: %v\n%s", q.nodes[i].Name, addr, err, q.nodes[i].Tail(2048))
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// awaitJetStream waits until the cluster has a JetStream meta leader.
func (q *clusterQueue) awaitJetStream(ctx context.Context) error {
	nc, err := q.Dial()
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.AccountInfo(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the cluster's JetStream is not ready: %w", err)
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// Leader names the node leading the tasks stream.
func (q *clusterQueue) Leader(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	nc, err := q.Dial()
	if err != nil {
		return ""
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return ""
	}
	s, err := js.Stream(ctx, queue.TasksStream)
	if err != nil {
		return ""
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil {
		return ""
	}
	return info.Cluster.Leader
}

func (q *clusterQueue) Dial() (*nats.Conn, error) {
	return nats.Connect(q.url(), nats.Name("wrench-chaos"))
}
