package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/shim"
)

// shimTarget is where the shim binary is mounted inside every sandbox.
const shimTarget = "/.wrench/wrench"

// Start creates, attaches and starts a container for spec and returns when
// the shim inside has said hello. On error nothing is left behind. Errors
// are [sandbox.Error]s: ErrInvalid for a bad spec (the task's fault),
// ErrImageMissing, ErrUnavailable when the engine cannot be reached or
// refuses the deployment's configuration (retry later).
func (p *Provider) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return p.start(ctx, spec)
}

func (p *Provider) start(ctx context.Context, spec sandbox.Spec) (*Sandbox, error) {
	spec, err := p.resolve(spec)
	if err != nil {
		return nil, err
	}
	info, err := p.engineInfo(ctx)
	if err != nil {
		return nil, err
	}
	if spec.NanoCPUs > int64(info.NCPU)*1e9 && info.NCPU > 0 {
		if spec.NanoCPUs != p.cfg.NanoCPUs {
			return nil, invalid("start", "cpus %.2f: the engine has %d", float64(spec.NanoCPUs)/1e9, info.NCPU)
		}
		spec.NanoCPUs = int64(info.NCPU) * 1e9 // the default, trimmed to the machine
	}
	if spec.Runtime != "" {
		if !slices.Contains(info.Runtimes, spec.Runtime) {
			// The runtime is the deployment's choice, never the task's.
			return nil, sbErr(sandbox.ErrUnavailable, "start", fmt.Errorf("runtime %q is not installed in the docker engine (a deployment problem; see `wrench doctor`)", spec.Runtime))
		}
	}
	if spec.WorkspaceDir != "" {
		if err := p.ownWorkspace(spec.WorkspaceDir); err != nil {
			return nil, err
		}
	}

	begin := time.Now()
	cfg, hc := p.containerConfig(spec)
	createCtx, cancel := context.WithTimeout(ctx, p.cfg.ReadyTimeout)
	created, err := p.cli.ContainerCreate(createCtx, cfg, hc, nil, nil, containerName(spec.TaskID))
	cancel()
	if err != nil {
		return nil, p.createErr(spec, err)
	}
	s := newSandbox(p, created.ID, spec)
	if spec.Tree != nil {
		// The tree takes as long as the repository is large: it has its
		// own bound, and the start's begins after it.
		copyCtx, cancel := context.WithTimeout(ctx, p.cfg.TreeTimeout)
		err := p.cli.CopyToContainer(copyCtx, created.ID, "/", spec.Tree, container.CopyToContainerOptions{})
		cancel()
		if err != nil {
			s.Close(context.WithoutCancel(ctx))
			return nil, engineErr("copy workspace", err)
		}
	}
	ctx, cancel = context.WithTimeout(ctx, p.cfg.ReadyTimeout)
	defer cancel()
	if err := s.boot(ctx); err != nil {
		s.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	p.cfg.Logger.DebugContext(ctx, "sandbox ready", "id", shortID(created.ID), "task_id", spec.TaskID, "image", spec.Image, "took", time.Since(begin))
	return s, nil
}

// boot attaches, starts and waits for the shim's hello.
func (s *Sandbox) boot(ctx context.Context) error {
	hj, err := s.p.cli.ContainerAttach(ctx, s.id, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return engineErr("attach", err)
	}
	s.client = shim.NewClient(newAttachConn(hj, s.stderr))
	if err := s.p.cli.ContainerStart(ctx, s.id, container.StartOptions{}); err != nil {
		return engineErr("start", err)
	}
	if _, err := s.client.Ready(ctx); err != nil {
		if ctx.Err() != nil && context.Cause(ctx) != context.DeadlineExceeded {
			return fmt.Errorf("sandbox start: %w", err)
		}
		return s.bootFailure(err)
	}
	s.startSupervisor(ctx)
	return nil
}

// bootFailure explains a shim that never said hello.
func (s *Sandbox) bootFailure(err error) error {
	ictx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg := fmt.Sprintf("shim did not start: %v", err)
	if st, ierr := s.p.cli.ContainerInspect(ictx, s.id); ierr == nil && st.State != nil && !st.State.Running {
		msg += fmt.Sprintf(" (container exited with code %d)", st.State.ExitCode)
	}
	if out := strings.TrimSpace(s.stderr.String()); out != "" {
		msg += ": " + out
	}
	if !s.p.shimStatic {
		msg += "; note: " + s.p.cfg.ShimPath + " is dynamically linked, build it with CGO_ENABLED=0"
	}
	return sbErr(sandbox.ErrUnavailable, "start", errors.New(msg))
}

// resolve fills a spec's defaults and checks it.
func (p *Provider) resolve(spec sandbox.Spec) (sandbox.Spec, error) {
	if spec.Image == "" {
		spec.Image = p.cfg.DefaultImage
	} else if err := checkImage("start", spec.Image); err != nil {
		return spec, err
	}
	switch spec.Network {
	case "":
		spec.Network = "none"
	case "none", "bridge":
	default:
		return spec, invalid("start", "network %q: want none or bridge", spec.Network)
	}
	if (spec.Root || spec.Tree != nil) && !spec.WritableRoot {
		return spec, invalid("start", "a tree or a root helper needs a writable root file system")
	}
	if spec.WritableRoot && spec.WorkspaceDir != "" {
		return spec, invalid("start", "a workspace directory and a writable root file system exclude each other")
	}
	if err := checkLimits("start", spec.MemoryBytes, spec.NanoCPUs, spec.Pids, spec.DiskBytes, spec.Timeout); err != nil {
		return spec, err
	}
	setDefault(&spec.MemoryBytes, p.cfg.MemoryBytes)
	setDefault(&spec.NanoCPUs, p.cfg.NanoCPUs)
	setDefault(&spec.Pids, p.cfg.Pids)
	setDefault(&spec.DiskBytes, p.cfg.DiskBytes)
	setDefault(&spec.Timeout, p.cfg.Timeout)
	if spec.Runtime == "" {
		spec.Runtime = p.cfg.Runtime
	}
	for k := range spec.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return spec, invalid("start", "environment variable name %q", k)
		}
	}
	if spec.EgressDir != "" {
		if fi, err := os.Stat(spec.EgressDir); !filepath.IsAbs(spec.EgressDir) || err != nil || !fi.IsDir() {
			return spec, invalid("start", "egress dir %s: not an absolute path to a directory", spec.EgressDir)
		}
	}
	if spec.WorkspaceDir != "" {
		if !filepath.IsAbs(spec.WorkspaceDir) {
			return spec, invalid("start", "workspace %s: not an absolute path", spec.WorkspaceDir)
		}
		fi, err := os.Stat(spec.WorkspaceDir)
		if err != nil || !fi.IsDir() {
			return spec, invalid("start", "workspace %s: not a directory", spec.WorkspaceDir)
		}
	}
	return spec, nil
}

// containerConfig is the hardened container for spec.
func (p *Provider) containerConfig(spec sandbox.Spec) (*container.Config, *container.HostConfig) {
	uid, gid, numeric := parseUser(p.cfg.User)
	homeOpts := "rw,exec,nosuid,nodev,mode=1777"
	if numeric {
		homeOpts = fmt.Sprintf("rw,exec,nosuid,nodev,mode=0755,uid=%d,gid=%d", uid, gid)
	}
	size := ",size=" + strconv.FormatInt(spec.DiskBytes, 10)
	tmpfs := map[string]string{
		"/tmp":        "rw,exec,nosuid,nodev,mode=1777" + size,
		p.cfg.HomeDir: homeOpts + size,
	}
	mounts := []mount.Mount{{Type: mount.TypeBind, Source: p.cfg.ShimPath, Target: shimTarget, ReadOnly: true}}
	switch {
	case spec.WritableRoot:
		// The workspace and the home directory live in the container's
		// layer (and reach a snapshot of it); /tmp stays a bounded tmpfs.
		delete(tmpfs, p.cfg.HomeDir)
	case spec.WorkspaceDir != "":
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: spec.WorkspaceDir, Target: sandbox.WorkDir})
	default:
		tmpfs[sandbox.WorkDir] = homeOpts + size
	}
	entry := []string{shimTarget, "__shim", "-workdir", sandbox.WorkDir}
	if spec.DiskBytes > 0 {
		// No single file may outgrow the disk limit, even between two of
		// the watchdog's samples (fallocate, a sparse file).
		entry = append(entry, "-max-file-size", strconv.FormatInt(spec.DiskBytes, 10))
	}
	if spec.EgressDir != "" {
		// The shim sets the proxy variables for commands while it forwards,
		// so they never enter the container's configuration (nor a
		// snapshot committed from it).
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: spec.EgressDir, Target: sandbox.EgressRunDir, ReadOnly: true})
		entry = append(entry, "-egress-socket", sandbox.EgressSocket, "-egress-listen", sandbox.EgressListen)
	}
	env := []string{"HOME=" + p.cfg.HomeDir}
	init := !p.cfg.NoInit
	pids := spec.Pids
	user := p.cfg.User
	var capAdd []string
	if spec.Root {
		user = "0:0"
		capAdd = setupCaps
	}
	labels := p.labels(spec.TaskID)
	for k, v := range spec.Labels {
		if _, ours := labels[k]; !ours {
			labels[k] = v
		}
	}
	cfg := &container.Config{
		Image:        spec.Image,
		User:         user,
		Entrypoint:   entry,
		Cmd:          []string{},
		WorkingDir:   sandbox.WorkDir,
		Env:          env,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		OpenStdin:    true,
		StdinOnce:    true,
		Labels:       labels,
	}
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(spec.Network),
		CapDrop:        []string{"ALL"},
		CapAdd:         capAdd,
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: !spec.WritableRoot,
		Tmpfs:          tmpfs,
		Mounts:         mounts,
		Init:           &init,
		Runtime:        spec.Runtime,
		LogConfig:      container.LogConfig{Type: "none"}, // stdout is the protocol: never log it
		Resources: container.Resources{
			Memory:     spec.MemoryBytes,
			MemorySwap: spec.MemoryBytes,
			NanoCPUs:   spec.NanoCPUs,
			PidsLimit:  &pids,
		},
	}
	return cfg, hc
}

// setupCaps are what a root setup needs to install Debian packages (dpkg
// owns and chmods files; apt drops to its own user to download) and to hand
// the workspace back to the sandbox user. Everything else stays dropped,
// and commands run without any of them unless they ask for root.
var setupCaps = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL"}

func (p *Provider) labels(taskID string) map[string]string {
	return sandbox.ResourceLabels(p.cfg.Deployment, taskID, p.owner)
}

var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// containerName is wrench-<task>-<random>, readable in `docker ps`.
func containerName(taskID string) string {
	var b [4]byte
	rand.Read(b[:])
	t := nameUnsafe.ReplaceAllString(taskID, "-")
	if len(t) > 40 {
		t = t[:40]
	}
	if t == "" {
		return "wrench-" + hex.EncodeToString(b[:])
	}
	return "wrench-" + strings.Trim(t, "-.") + "-" + hex.EncodeToString(b[:])
}

func shortID(id string) string { return id[:min(12, len(id))] }

// parseUser reads "uid:gid" (or "uid"); numeric is false for names.
func parseUser(u string) (uid, gid int, numeric bool) {
	us, gs, hasGroup := strings.Cut(u, ":")
	uid, err := strconv.Atoi(us)
	if err != nil {
		return 0, 0, false
	}
	gid = uid
	if hasGroup {
		if gid, err = strconv.Atoi(gs); err != nil {
			return 0, 0, false
		}
	}
	return uid, gid, true
}

func checkUser(u string) error {
	name, _, _ := strings.Cut(u, ":")
	if uid, _, numeric := parseUser(u); numeric && uid == 0 || name == "root" || name == "" {
		return fmt.Errorf("user %q: the sandbox never runs as root", u)
	}
	return nil
}

// ownWorkspace gives the workspace to the sandbox user when this process
// may (it runs as root) and the workspace root is not already the user's;
// a workspace prepared for the user (see package workspace) costs one stat.
func (p *Provider) ownWorkspace(dir string) error {
	uid, gid, numeric := parseUser(p.cfg.User)
	if !numeric || os.Geteuid() != 0 {
		return nil
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return invalid("start", "workspace %s: %v", dir, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == gid {
		return nil
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid) // never follows a link out
	})
	if err != nil {
		return invalid("start", "give workspace %s to %s: %v", dir, p.cfg.User, err)
	}
	return nil
}
