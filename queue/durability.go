package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Sync is how a NATS server syncs JetStream writes to disk.
type Sync string

// Sync settings.
const (
	// SyncAlways: every write is synced before it is acknowledged.
	SyncAlways Sync = "always"
	// SyncLazy: writes are synced every sync_interval (2 minutes by
	// default); until then an acknowledged write lives in the OS's page
	// cache and is lost on an OS crash or a power loss.
	SyncLazy Sync = "lazy"
	// SyncUnknown: the server's setting could not be read.
	SyncUnknown Sync = "unknown"
)

// Durability is what an acknowledged submission survives.
type Durability struct {
	// Replicas of the task stream and the state bucket (the smaller).
	Replicas int
	// Sync is the servers' setting (the weakest of them).
	Sync Sync
}

// Level names the durability: "fsync" (every write synced: survives an OS
// crash or power loss), "replicated" (on three or more servers synced
// lazily: lost only when a majority loses power at once), "memory" (one
// replica synced lazily: lost on an OS crash or power loss), or "unknown".
func (d Durability) Level() string {
	switch {
	case d.Sync == SyncAlways:
		return "fsync"
	case d.Replicas >= 3:
		return "replicated"
	case d.Sync == SyncLazy:
		return "memory"
	default:
		return "unknown"
	}
}

// Problem says what is at risk, and the fix; "" when an accepted task
// survives the loss of a server's power.
func (d Durability) Problem() string {
	switch d.Level() {
	case "memory":
		return fmt.Sprintf("NATS syncs JetStream lazily and the queue has %d replica: a task the API accepted is lost on an OS crash or power loss of the server. "+
			"Run nats-server with `jetstream { sync_interval: always }`, or a three-node cluster with --replicas 3", d.Replicas)
	case "unknown":
		return fmt.Sprintf("could not read NATS's sync setting and the queue has %d replica: unless nats-server runs with `jetstream { sync_interval: always }`, "+
			"a task the API accepted is lost on an OS crash or power loss. Pass --nats-monitor so wrench can check, or use --replicas 3 on a cluster", d.Replicas)
	}
	return ""
}

// Durability reports the replicas of the queue and the sync setting of its
// servers. known, when not SyncUnknown, is the setting without asking (the
// embedded server). Otherwise the servers are asked through their
// monitoring endpoints (http://host:8222), else through the system account
// (which needs system credentials); failing both, Sync is SyncUnknown.
func (c *Conn) Durability(ctx context.Context, known Sync, monitors []string) (Durability, error) {
	d := Durability{Sync: known}
	reps := 0
	for _, name := range []string{TasksStream, "KV_" + StateBucket} {
		s, err := c.js.Stream(ctx, name)
		if err != nil {
			return d, fmt.Errorf("read stream %s: %w", name, err)
		}
		if r := s.CachedInfo().Config.Replicas; reps == 0 || r < reps {
			reps = r
		}
	}
	d.Replicas = max(reps, 1)
	if d.Sync == "" || d.Sync == SyncUnknown {
		d.Sync = c.probeSync(ctx, monitors)
	}
	return d, nil
}

// varz is the part of a server's /varz that says how it syncs.
type varz struct {
	JetStream struct {
		Config *struct {
			SyncInterval time.Duration `json:"sync_interval"`
			SyncAlways   bool          `json:"sync_always"`
		} `json:"config"`
	} `json:"jetstream"`
}

func (v varz) sync() Sync {
	switch cfg := v.JetStream.Config; {
	case cfg == nil:
		return SyncUnknown
	case cfg.SyncAlways:
		return SyncAlways
	default:
		return SyncLazy
	}
}

// weakest combines the settings of several servers.
func weakest(a, b Sync) Sync {
	switch {
	case a == "":
		return b
	case a == SyncLazy || b == SyncLazy:
		return SyncLazy
	case a == SyncUnknown || b == SyncUnknown:
		return SyncUnknown
	}
	return SyncAlways
}

const probeTimeout = 2 * time.Second

func (c *Conn) probeSync(ctx context.Context, monitors []string) Sync {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var s Sync
	for _, m := range monitors {
		v, err := fetchVarz(ctx, m)
		if err != nil {
			c.log.Warn("read NATS monitoring endpoint", "url", m, "err", err)
			s = weakest(s, SyncUnknown)
			continue
		}
		s = weakest(s, v.sync())
	}
	if s != "" {
		return s
	}
	return c.pingVarz(ctx)
}

func fetchVarz(ctx context.Context, base string) (varz, error) {
	var v varz
	u := strings.TrimRight(base, "/")
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/varz", nil)
	if err != nil {
		return v, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("%s", resp.Status)
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&v)
	return v, err
}

// pingVarz asks every server through the system account; SyncUnknown when
// none answers (the connection is not a system user).
func (c *Conn) pingVarz(ctx context.Context) Sync {
	inbox := nats.NewInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return SyncUnknown
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.nc.PublishRequest("$SYS.REQ.SERVER.PING.VARZ", inbox, nil); err != nil {
		return SyncUnknown
	}
	var s Sync
	wait := 500 * time.Millisecond
	for {
		m, err := sub.NextMsg(wait)
		if errors.Is(err, nats.ErrTimeout) || err != nil || ctx.Err() != nil {
			break
		}
		var resp struct {
			Data varz `json:"data"`
		}
		if json.Unmarshal(m.Data, &resp) == nil {
			s = weakest(s, resp.Data.sync())
		}
		wait = 200 * time.Millisecond
	}
	if s == "" {
		return SyncUnknown
	}
	return s
}
