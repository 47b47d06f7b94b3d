package queue

import (
	"context"
	"fmt"
	"strings"
)

// Placement is where one of the queue's streams (the task, event and
// dead-letter streams and the streams behind the state bucket and the
// artifact store) keeps its replicas, and which of them are current.
type Placement struct {
	// Stream is the JetStream stream's name.
	Stream string
	// Cluster is the NATS cluster's name ("" on a single server).
	Cluster string
	// Replicas is how many copies the stream is configured to keep.
	Replicas int
	// Leader is the server that orders its writes ("" without quorum: no
	// write is accepted).
	Leader string
	// Current are the servers holding a current copy, the leader first.
	Current []string
	// Behind are the replicas that are offline or catching up.
	Behind []string
}

// Healthy reports whether every configured replica is current.
func (p Placement) Healthy() bool { return p.Leader != "" && len(p.Current) == p.Replicas }

// String says it in one line: "WRENCH_TASKS: 2 of 3 current (n1*, n2), n3 behind".
func (p Placement) String() string {
	if p.Leader == "" {
		return fmt.Sprintf("%s: no leader (%d of %d replicas reachable): writes are refused", p.Stream, len(p.Current), p.Replicas)
	}
	cur := append([]string{p.Current[0] + "*"}, p.Current[1:]...)
	s := fmt.Sprintf("%s: %d of %d current (%s)", p.Stream, len(p.Current), p.Replicas, strings.Join(cur, ", "))
	if len(p.Behind) > 0 {
		s += ", behind: " + strings.Join(p.Behind, ", ")
	}
	return s
}

// QueueStreams are the names of the streams that hold the queue.
var QueueStreams = []string{TasksStream, EventsStream, DeadLetterStream, "KV_" + StateBucket, "OBJ_" + ArtifactsBucket}

// Placements reads the placement of every stream of the queue, asking the
// stream leaders (a stream without a leader is reported so, not as an
// error).
func (c *Conn) Placements(ctx context.Context) ([]Placement, error) {
	var out []Placement
	for _, name := range QueueStreams {
		s, err := c.js.Stream(ctx, name)
		if err != nil {
			return out, fmt.Errorf("read stream %s: %w", name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return out, fmt.Errorf("read stream %s: %w", name, err)
		}
		p := Placement{Stream: name, Replicas: max(info.Config.Replicas, 1)}
		switch cl := info.Cluster; {
		case cl == nil:
			p.Leader, p.Current = "local", []string{"local"}
		default:
			p.Cluster, p.Leader = cl.Name, cl.Leader
			if cl.Leader != "" {
				p.Current = append(p.Current, cl.Leader)
			}
			for _, r := range cl.Replicas {
				if r.Current && !r.Offline {
					p.Current = append(p.Current, r.Name)
				} else {
					p.Behind = append(p.Behind, r.Name)
				}
			}
		}
		out = append(out, p)
	}
	return out, nil
}
