// Package doctor checks what a Docker engine supports against what
// Wrench's sandboxes need, and says what to fix.
//
// [Check] asks the engine for its version and info, looks up the sandbox
// image and checks that the engine sees the paths sandboxes bind-mount. It never fails: everything it finds, including an
// unreachable engine, lands in the [Report], whose Problems are what makes
// the configuration unusable (each with a fix) and whose Warnings weaken
// the sandbox without stopping it.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/wrenchworks/wrench/sandbox/docker"
	"github.com/wrenchworks/wrench/sandbox/image"
)

// MinAPIVersion is the oldest engine API Wrench supports (Docker 20.10).
const MinAPIVersion = "1.41"

// Engine is what the doctor asks of the engine.
type Engine interface {
	Version(ctx context.Context) (docker.Version, error)
	Info(ctx context.Context) (docker.Info, error)
	image.Inspector
	// CheckBindSources says whether the engine sees paths at the same
	// paths as this process (see [docker.Engine.CheckBindSources]).
	CheckBindSources(ctx context.Context, image string, paths []string) error
}

var _ Engine = (*docker.Engine)(nil)

// Options say what the configuration needs.
type Options struct {
	// Image is the sandbox image tasks use; empty means image.DefaultTag.
	Image string
	// Runtime is the OCI runtime sandboxes use (e.g. "runsc"); empty
	// means the engine's default.
	Runtime string
	// BindSources are the paths (directories or files, as this process
	// sees them) sandboxes will bind-mount; the check that the engine sees
	// them at the same paths needs the image present.
	BindSources []string
}

// Finding is one problem or warning.
type Finding struct {
	// Check names what was checked: engine, api, limits, runtime, image,
	// mounts, security.
	Check   string `json:"check"`
	Message string `json:"message"`
	// Fix says what to do about it, when something can be done.
	Fix string `json:"fix,omitempty"`
}

// Report is what Check found.
type Report struct {
	Reachable bool `json:"reachable"`

	EngineVersion string `json:"engine_version,omitempty"`
	// APIVersion and MinAPIVersion are the engine's; NegotiatedAPIVersion
	// is what this client speaks to it.
	APIVersion           string `json:"api_version,omitempty"`
	MinAPIVersion        string `json:"min_api_version,omitempty"`
	NegotiatedAPIVersion string `json:"negotiated_api_version,omitempty"`
	OS                   string `json:"os,omitempty"`
	Kernel               string `json:"kernel,omitempty"`
	NCPU                 int    `json:"ncpu,omitempty"`
	MemTotal             int64  `json:"mem_total,omitempty"`

	CgroupVersion string `json:"cgroup_version,omitempty"`
	CgroupDriver  string `json:"cgroup_driver,omitempty"`
	// Whether the engine enforces each kind of limit.
	MemoryLimit bool `json:"memory_limit"`
	SwapLimit   bool `json:"swap_limit"`
	PidsLimit   bool `json:"pids_limit"`
	CPUQuota    bool `json:"cpu_quota"`

	Runtimes       []string `json:"runtimes,omitempty"`
	DefaultRuntime string   `json:"default_runtime,omitempty"`
	// Runtime is the runtime the configuration asks for ("" = default).
	Runtime string `json:"runtime,omitempty"`
	Runsc   bool   `json:"runsc"`

	Rootless        bool     `json:"rootless"`
	Seccomp         bool     `json:"seccomp"`
	AppArmor        bool     `json:"apparmor"`
	SELinux         bool     `json:"selinux"`
	UserNS          bool     `json:"userns"`
	SecurityOptions []string `json:"security_options,omitempty"`

	Image image.Status `json:"image"`

	Problems []Finding `json:"problems"`
	Warnings []Finding `json:"warnings"`
}

// OK reports whether nothing the configuration needs is missing.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

func (r *Report) problem(check, fix, format string, args ...any) {
	r.Problems = append(r.Problems, Finding{Check: check, Message: fmt.Sprintf(format, args...), Fix: fix})
}

func (r *Report) warn(check, fix, format string, args ...any) {
	r.Warnings = append(r.Warnings, Finding{Check: check, Message: fmt.Sprintf(format, args...), Fix: fix})
}

// Check asks eng what it supports and compares it with opts.
func Check(ctx context.Context, eng Engine, opts Options) Report {
	if opts.Image == "" {
		opts.Image = image.DefaultTag
	}
	r := Report{Runtime: opts.Runtime, Image: image.Status{Tag: opts.Image}, Problems: []Finding{}, Warnings: []Finding{}}
	v, err := eng.Version(ctx)
	if err != nil {
		r.problem("engine", "start the Docker engine, or point DOCKER_HOST at one",
			"docker engine unreachable: %v", err)
		return r
	}
	r.Reachable = true
	r.EngineVersion, r.APIVersion, r.MinAPIVersion, r.NegotiatedAPIVersion = v.Engine, v.API, v.MinAPI, v.Negotiated
	if v.API != "" && versionLess(v.API, MinAPIVersion) {
		r.problem("api", "upgrade the Docker engine to 20.10 or later",
			"engine API %s is older than %s (Docker 20.10)", v.API, MinAPIVersion)
	}

	info, err := eng.Info(ctx)
	if err != nil {
		r.problem("engine", "check the engine's logs", "docker info failed: %v", err)
	} else {
		r.checkInfo(info, opts)
	}

	st, err := image.Inspect(ctx, eng, opts.Image)
	r.Image = st
	switch {
	case err != nil:
		r.problem("image", "", "look up image %s: %v", opts.Image, err)
	case !st.Present && opts.Image == image.DefaultTag:
		r.problem("image", "run `wrench image build`", "sandbox image %s not found", opts.Image)
	case !st.Present:
		r.problem("image", "build or `docker load` it on this host (there is no registry to pull from), or use `wrench image build` for the default image",
			"sandbox image %s not found", opts.Image)
	case !st.Current && opts.Image == image.DefaultTag:
		r.warn("image", "run `wrench image build`", "sandbox image %s was built from an older recipe", opts.Image)
	}
	if st.Present {
		r.checkMounts(ctx, eng, opts)
	}
	return r
}

// checkMounts checks that the engine sees opts.BindSources at the same
// paths as this process.
func (r *Report) checkMounts(ctx context.Context, eng Engine, opts Options) {
	if len(opts.BindSources) == 0 {
		return
	}
	err := eng.CheckBindSources(ctx, opts.Image, opts.BindSources)
	var hidden *docker.HiddenPathsError
	switch {
	case errors.As(err, &hidden):
		r.problem("mounts", hidden.Fix(), "the engine cannot see %s at the same path as this process: every sandbox would fail to start",
			strings.Join(hidden.Paths, ", "))
	case err != nil:
		r.warn("mounts", "", "could not check that the engine sees %s: %v", strings.Join(opts.BindSources, ", "), err)
	}
}

func (r *Report) checkInfo(info docker.Info, opts Options) {
	r.OS, r.Kernel, r.NCPU, r.MemTotal = info.OS, info.Kernel, info.NCPU, info.MemTotal
	r.CgroupVersion, r.CgroupDriver = info.CgroupVersion, info.CgroupDriver
	r.MemoryLimit, r.SwapLimit, r.PidsLimit, r.CPUQuota = info.MemoryLimit, info.SwapLimit, info.PidsLimit, info.CPUQuota
	cgroupFix := "enable the cgroup controller (cgroup v2, or the matching cgroup_enable= kernel parameter on v1)"
	if !info.MemoryLimit {
		r.problem("limits", cgroupFix, "memory limits are not enforced by this engine")
	}
	if !info.PidsLimit {
		r.problem("limits", cgroupFix, "pids limits are not enforced by this engine (a fork bomb would reach the host)")
	}
	if !info.CPUQuota {
		r.warn("limits", cgroupFix, "CPU limits are not enforced by this engine")
	}
	if info.MemoryLimit && !info.SwapLimit {
		r.warn("limits", "enable swap accounting (swapaccount=1 on cgroup v1)", "swap is not limited: a sandbox at its memory limit may swap instead of being stopped")
	}

	r.Runtimes = info.Runtimes
	r.DefaultRuntime = info.DefaultRuntime
	r.Runsc = slices.Contains(r.Runtimes, "runsc")
	if opts.Runtime != "" && !slices.Contains(r.Runtimes, opts.Runtime) {
		fix := `register it under "runtimes" in /etc/docker/daemon.json and restart dockerd`
		if opts.Runtime == "runsc" {
			fix = "install gVisor (https://gvisor.dev/docs/user_guide/install/), run `runsc install`, and restart dockerd"
		}
		r.problem("runtime", fix, "runtime %q is not installed in the engine (installed: %s)", opts.Runtime, strings.Join(r.Runtimes, ", "))
	}

	r.SecurityOptions = info.SecurityOptions
	for _, o := range info.SecurityOptions {
		name := o
		for _, kv := range strings.Split(o, ",") {
			if n, ok := strings.CutPrefix(kv, "name="); ok {
				name = n
			}
		}
		switch name {
		case "rootless":
			r.Rootless = true
		case "seccomp":
			r.Seccomp = true
		case "apparmor":
			r.AppArmor = true
		case "selinux":
			r.SELinux = true
		case "userns":
			r.UserNS = true
		}
	}
	if !r.Seccomp {
		r.warn("security", "use an engine built with seccomp support", "no seccomp profile: sandboxes get the full system call surface")
	}
}

// versionLess compares dotted numeric versions ("1.9" < "1.41").
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}
