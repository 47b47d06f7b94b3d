package docker

import (
	"context"
	"fmt"
	"sort"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/wrenchworks/wrench/sandbox"
)

// Engine is a connection to a Docker engine for the parts of Wrench that
// manage the engine rather than run sandboxes in it: the image build, the
// doctor, the reaper. A [Provider] runs on one ([Config.Engine]). Its
// methods speak the sandbox vocabulary ([sandbox.Image],
// [sandbox.Container]) and plain structs, so that no package but this one
// needs the Docker SDK. It is safe for concurrent use.
type Engine struct {
	cli  *client.Client
	owns bool
}

// FromEnv makes this process's client of the engine the environment names
// (DOCKER_HOST, DOCKER_CERT_PATH, DOCKER_TLS_VERIFY, …), which negotiates
// the API version on its first call. It does not reach the engine: while
// the engine is down, calls fail with a [sandbox.Error] of kind
// [sandbox.ErrUnavailable]. Call [Engine.Close] when done.
func FromEnv() (*Engine, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, sbErr(sandbox.ErrUnavailable, "connect", fmt.Errorf("docker client: %w", err))
	}
	return &Engine{cli: cli, owns: true}, nil
}

// NewEngine wraps a client its caller made and keeps (a test kit's);
// [Engine.Close] leaves it open.
func NewEngine(cli *client.Client) *Engine { return &Engine{cli: cli} }

// Close releases the client [FromEnv] made.
func (e *Engine) Close() error {
	if e.owns {
		return e.cli.Close()
	}
	return nil
}

// Ping checks that the engine answers; the error is a [sandbox.Error] of
// kind [sandbox.ErrUnavailable] when it does not.
func (e *Engine) Ping(ctx context.Context) error {
	_, err := e.cli.Ping(ctx)
	return engineErr("ping", err)
}

// Version is what the engine says of its version.
type Version struct {
	// Engine is the engine's release ("28.5.2").
	Engine string
	// API and MinAPI are the newest and oldest API versions the engine
	// speaks; Negotiated is the one this client speaks to it.
	API, MinAPI, Negotiated string
}

// Version asks the engine for its version. The error is the client's, as
// it said it (the doctor quotes it).
func (e *Engine) Version(ctx context.Context) (Version, error) {
	v, err := e.cli.ServerVersion(ctx)
	if err != nil {
		return Version{}, err
	}
	return Version{Engine: v.Version, API: v.APIVersion, MinAPI: v.MinAPIVersion, Negotiated: e.cli.ClientVersion()}, nil
}

// Info is what the engine says of its host and of what it enforces.
type Info struct {
	OS       string
	Kernel   string
	NCPU     int
	MemTotal int64

	CgroupVersion string
	CgroupDriver  string
	// Whether the engine enforces each kind of limit.
	MemoryLimit bool
	SwapLimit   bool
	PidsLimit   bool
	CPUQuota    bool

	// Runtimes are the names of the OCI runtimes registered with the
	// engine, sorted.
	Runtimes       []string
	DefaultRuntime string
	// SecurityOptions are the engine's, as it lists them
	// ("name=seccomp,profile=default", …).
	SecurityOptions []string
}

// Info asks the engine about its host and what it enforces. The error is
// the client's, as it said it (the doctor quotes it).
func (e *Engine) Info(ctx context.Context) (Info, error) {
	i, err := e.cli.Info(ctx)
	if err != nil {
		return Info{}, err
	}
	out := Info{
		OS: i.OperatingSystem, Kernel: i.KernelVersion, NCPU: i.NCPU, MemTotal: i.MemTotal,
		CgroupVersion: i.CgroupVersion, CgroupDriver: i.CgroupDriver,
		MemoryLimit: i.MemoryLimit, SwapLimit: i.SwapLimit, PidsLimit: i.PidsLimit, CPUQuota: i.CPUCfsQuota,
		DefaultRuntime: i.DefaultRuntime, SecurityOptions: i.SecurityOptions,
	}
	for name := range i.Runtimes {
		out.Runtimes = append(out.Runtimes, name)
	}
	sort.Strings(out.Runtimes)
	return out, nil
}

// Containers lists the engine's containers, running or not, that carry
// every one of labels ("key", any value, or "key=value").
func (e *Engine) Containers(ctx context.Context, labels ...string) ([]sandbox.Container, error) {
	f := filters.NewArgs()
	for _, l := range labels {
		f.Add("label", l)
	}
	list, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, engineErr("list containers", err)
	}
	out := make([]sandbox.Container, 0, len(list))
	for _, c := range list {
		out = append(out, sandbox.Container{ID: c.ID, Labels: c.Labels, Created: time.Unix(c.Created, 0)})
	}
	return out, nil
}

// RemoveContainer stops a container if it runs and removes it with its
// anonymous volumes. A container that is already gone is not an error.
func (e *Engine) RemoveContainer(ctx context.Context, id string) error {
	err := e.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return engineErr("remove container", err)
	}
	return nil
}
