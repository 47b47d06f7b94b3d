package chaos

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
)

// Queue is the NATS a deployment runs on, and what the NATS fault kills.
// It has more than five methods because each way of running NATS (serve's
// embedded one, a cluster of its own) answers all of them: the suite asks
// one value for the flags, the nodes and their restarts.
type Queue interface {
	// Kind names it in reports ("embedded", "cluster of 3").
	Kind() string
	// Start starts its own servers, if it has any.
	Start(ctx context.Context) error
	// ServeArgs are the flags `wrench serve` gets to use it.
	ServeArgs() []string
	// Joined is called once serve runs: a queue served by serve learns
	// there how workers sign in.
	Joined(ctx context.Context, serve *Proc) error
	// WorkerArgs are the flags a `wrench worker` gets to join it.
	WorkerArgs() []string
	// Nodes are the NATS servers the fault may kill, each restarted with
	// Restart. With the NATS embedded in serve, serve is the node.
	Nodes() []*Proc
	// Restart starts a killed node again and waits until it serves.
	Restart(ctx context.Context, node *Proc) error
	// Leader names the node leading the tasks stream ("" if unknown).
	Leader(ctx context.Context) string
	// Dial opens a raw connection, for the end checks.
	Dial() (*nats.Conn, error)
}

// embeddedQueue is the NATS `wrench serve` embeds, served on a fixed
// loopback port so that workers reconnect to it after serve restarts.
type embeddedQueue struct {
	addr    string // host:port of the embedded NATS
	dataDir string // serve's data dir
	serve   *Proc
	seed    string
}

// newEmbeddedQueue picks a free port for serve's NATS.
func newEmbeddedQueue(serveData string) (*embeddedQueue, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return &embeddedQueue{addr: addr, dataDir: serveData}, nil
}

func (q *embeddedQueue) Kind() string                  { return "NATS embedded in serve (one node)" }
func (q *embeddedQueue) Start(context.Context) error   { return nil }
func (q *embeddedQueue) ServeArgs() []string           { return []string{"--nats-listen", q.addr} }
func (q *embeddedQueue) Leader(context.Context) string { return "serve" }
func (q *embeddedQueue) Nodes() []*Proc                { return []*Proc{q.serve} }

func (q *embeddedQueue) Joined(ctx context.Context, serve *Proc) error {
	q.serve = serve
	rest, err := serve.WaitLine(ctx, "wrench serve: workers sign in with ")
	if err != nil {
		return err
	}
	q.seed = strings.TrimSpace(strings.TrimPrefix(rest, "--nats-nkey "))
	if q.seed == "" {
		q.seed = filepath.Join(q.dataDir, "nats", "worker.nk")
	}
	return nil
}

func (q *embeddedQueue) WorkerArgs() []string {
	return []string{"--nats", "nats://" + q.addr, "--nats-nkey", q.seed}
}

// Restart is the deployment's: serve is restarted as serve.
func (q *embeddedQueue) Restart(ctx context.Context, node *Proc) error {
	return fmt.Errorf("the embedded NATS restarts with serve")
}

func (q *embeddedQueue) Dial() (*nats.Conn, error) {
	signIn, err := nats.NkeyOptionFromSeed(q.seed)
	if err != nil {
		return nil, err
	}
	return nats.Connect("nats://"+q.addr, signIn, nats.Name("wrench-chaos"))
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
