package chaos

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// Config is one run of the suite. Zero fields take the defaults of
// [Config.withDefaults].
type Config struct {
	// Bin is the wrench binary every process runs (required).
	Bin string
	// Dir is where the run keeps repositories, data dirs and process
	// logs (required; the caller removes it).
	Dir string
	// Tasks is how many tasks are submitted (default 500).
	Tasks int
	// Seed draws the plan: which tasks each fault hits, shapes and pauses.
	Seed uint64
	// FaultsPerKind is how many faults of each kind are aimed (default:
	// the larger of 3 and Tasks/40). A fault whose phase its task passed
	// before the suite saw it is reported as missed, not injected.
	FaultsPerKind int
	// Workers and Slots: worker processes and the tasks each runs at once
	// (default 3 and 2).
	Workers, Slots int
	// InFlight bounds the tasks submitted and not yet final (default
	// twice the slots), so that latency measures the service rather than
	// a backlog.
	InFlight int
	// AckWait is the workers' --ack-wait (default 3s): a SIGSTOPped worker
	// is kept stopped past it.
	AckWait time.Duration
	// GitHubShare is the share of tasks that come from GitHub (a signed
	// webhook from the stand-in GitHub, published back to it as a pull
	// request and a comment) rather than the API (default 0.1; negative:
	// none). The publish faults are aimed at them.
	GitHubShare float64
	// Embedded runs the deployment on the NATS `wrench serve` embeds
	// (one node, the serve process) instead of three clustered NATS
	// server processes (`wrench nats-server`, every stream R3).
	Embedded bool
	// Deployment labels the run's containers and workspaces (default
	// "chaos-<seed>-<time>").
	Deployment string
	// Timeout bounds the whole run (default 30m).
	Timeout time.Duration
	// Out receives the report (default io.Discard); Log the progress.
	Out io.Writer
	Log *slog.Logger
}

// withDefaults fills the zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.Bin == "" || c.Dir == "" {
		return c, errors.New("chaos: Bin and Dir are required")
	}
	if c.Tasks == 0 {
		c.Tasks = 500
	}
	if c.Tasks < 20 {
		return c, fmt.Errorf("chaos: %d tasks is too few to aim every fault", c.Tasks)
	}
	if c.FaultsPerKind == 0 {
		c.FaultsPerKind = max(3, c.Tasks/40)
	}
	if c.Workers == 0 {
		c.Workers = 3
	}
	if c.Workers < 2 {
		return c, errors.New("chaos: at least 2 workers, so that another can take a killed one's task")
	}
	if c.Slots == 0 {
		c.Slots = 2
	}
	if c.InFlight == 0 {
		c.InFlight = 2 * c.Workers * c.Slots
	}
	if c.GitHubShare == 0 {
		c.GitHubShare = 0.1
	}
	if c.AckWait == 0 {
		c.AckWait = 3 * time.Second
	}
	if c.Deployment == "" {
		c.Deployment = fmt.Sprintf("chaos-%d-%d", c.Seed, time.Now().Unix())
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Minute
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// queue is the Queue the run uses.
func (c Config) queue(dir, serveData string) (Queue, error) {
	if c.Embedded {
		return newEmbeddedQueue(serveData)
	}
	return newClusterQueue(c.Bin, dir)
}
