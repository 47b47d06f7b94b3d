package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

// Config configures a [Manager].
type Config struct {
	// Root is where workspaces live, e.g. $DATA/workspaces. It is created
	// when missing.
	Root string
	// MirrorDir holds one bare mirror per host and repository path, plus
	// cached checkouts, so later tasks on the same repository clone from
	// local disk; "" disables mirrors.
	MirrorDir string
	// Deployment labels every workspace, so the reaper removes only its own.
	Deployment string
	// Owner is who the working tree must belong to (the sandbox's non-root
	// user); nil leaves files owned by this process.
	Owner *Owner
	// Logger receives one line per clone; nil discards. Tokens are never
	// logged.
	Logger *slog.Logger
	// CABundle is extra PEM certificates to trust for https remotes.
	CABundle []byte
	// Credentials, when set, is asked for each https clone's credential
	// before the auth argument of Open (which is used when it has none).
	Credentials Credentials
	// DisableLocal refuses file:// URLs and local paths (e.g. for tasks
	// that arrive over the public API).
	DisableLocal bool
	// CheckoutCache is how many checked-out trees each mirror keeps for
	// fast workspace creation; 0 means 2, negative disables the cache.
	CheckoutCache int
}

// Owner is a uid/gid pair.
type Owner struct{ UID, GID int }

// Auth holds a token for https remotes. The token is sent as HTTP basic
// auth (user "x-access-token") to the hosts it names and nowhere else, is
// never written to disk and never logged: Auth formats as "[redacted]".
type Auth struct {
	Token string
	// Hosts are the hosts the token belongs to ("github.com",
	// "git.example.com:8443"; case-insensitive; without a port, any port
	// of that host). An Auth that names no host is never sent.
	Hosts []string
}

// allows reports whether the token may go to host (host[:port]).
func (a *Auth) allows(host string) bool {
	host = strings.ToLower(host)
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	for _, want := range a.Hosts {
		want = strings.ToLower(strings.TrimSpace(want))
		if want != "" && (want == host || want == name) {
			return true
		}
	}
	return false
}

// String hides the token.
func (a Auth) String() string { return "[redacted]" }

// GoString hides the token from %#v.
func (a Auth) GoString() string { return "workspace.Auth{Token:[redacted]}" }

// LogValue hides the token from slog.
func (a Auth) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// Manager creates workspaces under Config.Root and lists or removes them
// for the reaper. It is safe for concurrent use; concurrent Opens of the
// same repository (in this process or others sharing MirrorDir) take turns
// on the mirror through a file lock.
type Manager struct {
	cfg   Config
	log   *slog.Logger
	host  string
	owner map[string]string // sandbox.OwnerLabels

	mirrorHits   atomic.Int64
	mirrorMisses atomic.Int64
}

// Stats counts how Opens used the mirrors.
type Stats struct {
	// MirrorHits counts Opens served from an existing mirror.
	MirrorHits int64
	// MirrorMisses counts Opens that had to create a mirror.
	MirrorMisses int64
}

// metaFile is the label file next to each workspace's working tree.
const metaFile = "wrench.json"

// NewManager checks cfg and creates Root (and MirrorDir) when missing.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Root == "" {
		return nil, errors.New("workspace: Config.Root is required")
	}
	if cfg.Deployment == "" {
		return nil, errors.New("workspace: Config.Deployment is required")
	}
	if cfg.CheckoutCache == 0 {
		cfg.CheckoutCache = 2
	}
	for _, d := range []string{cfg.Root, cfg.MirrorDir} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("workspace: create %s: %w", d, err)
		}
	}
	var err error
	if cfg.Root, err = filepath.Abs(cfg.Root); err != nil {
		return nil, err
	}
	if cfg.MirrorDir != "" {
		if cfg.MirrorDir, err = filepath.Abs(cfg.MirrorDir); err != nil {
			return nil, err
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	host, _ := os.Hostname()
	return &Manager{cfg: cfg, log: log, host: host, owner: sandbox.OwnerLabels(host)}, nil
}

// Stats returns the mirror counters.
func (m *Manager) Stats() Stats {
	return Stats{MirrorHits: m.mirrorHits.Load(), MirrorMisses: m.mirrorMisses.Load()}
}

// Info describes one workspace directory under Config.Root, for the
// reaper (the sandbox vocabulary's type, so that the reaper needs nothing
// of this package).
type Info = sandbox.WorkspaceInfo

// List returns the workspaces under Root that carry this deployment's
// label, and directories with no readable label (Deployment ""; Created is
// the directory's modification time): a crash can leave one between
// creating a directory and labelling it. Sorted by Created.
func (m *Manager) List() ([]Info, error) {
	des, err := os.ReadDir(m.cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	var out []Info
	for _, de := range des {
		if !de.IsDir() {
			continue
		}
		dir := filepath.Join(m.cfg.Root, de.Name())
		info, err := readMeta(dir)
		if err != nil {
			fi, serr := de.Info()
			if serr != nil {
				continue
			}
			out = append(out, Info{Dir: dir, Created: fi.ModTime()})
			continue
		}
		if info.Deployment != m.cfg.Deployment {
			continue
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// Remove deletes a workspace listed by List. It refuses directories that
// are not directly under Root, never follows symlinks, and treats a
// missing directory as removed.
func (m *Manager) Remove(info Info) error {
	dir := filepath.Clean(info.Dir)
	if filepath.Dir(dir) != m.cfg.Root {
		return fmt.Errorf("remove workspace %s: not under %s", info.Dir, m.cfg.Root)
	}
	if err := m.removeDir(filepath.Base(dir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove workspace %s: %w", info.Dir, err)
	}
	return nil
}

// removeDir removes Root/name through an os.Root, so no symlink inside is
// followed. Directories the sandbox made unwritable are opened up first
// when this process is not root.
func (m *Manager) removeDir(name string) error {
	root, err := os.OpenRoot(m.cfg.Root)
	if err != nil {
		return err
	}
	defer root.Close()
	err = root.RemoveAll(name)
	if err != nil && errors.Is(err, fs.ErrPermission) {
		_ = makeWritable(root, name)
		err = root.RemoveAll(name)
	}
	return err
}

// makeWritable adds owner rwx to every directory under name.
func makeWritable(root *os.Root, name string) error {
	return fs.WalkDir(root.FS(), name, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = root.Chmod(p, 0o700)
		}
		return nil
	})
}

// newDir creates Root/<task>-<random> and labels it.
func (m *Manager) newDir(taskID string) (name string, err error) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name = sanitizeName(taskID) + "-" + hex.EncodeToString(rnd[:])
	dir := filepath.Join(m.cfg.Root, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	labels := sandbox.ResourceLabels(m.cfg.Deployment, taskID, m.owner)
	data, _ := json.MarshalIndent(labels, "", "  ")
	tmp := filepath.Join(dir, metaFile+".tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return name, err
	}
	return name, os.Rename(tmp, filepath.Join(dir, metaFile))
}

// readMeta reads a workspace directory's labels.
func readMeta(dir string) (Info, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Info{}, err
	}
	defer root.Close()
	data, err := root.ReadFile(metaFile)
	if err != nil {
		return Info{}, err
	}
	var labels map[string]string
	if err := json.Unmarshal(data, &labels); err != nil {
		return Info{}, err
	}
	if labels[sandbox.LabelManaged] != "true" {
		return Info{}, errors.New("not a wrench workspace")
	}
	created, _ := time.Parse(time.RFC3339Nano, labels[sandbox.LabelCreated])
	pid, _ := strconv.Atoi(labels[sandbox.LabelOwnerPID])
	start, _ := strconv.ParseUint(labels[sandbox.LabelOwnerStart], 10, 64)
	return Info{
		Dir:        dir,
		TaskID:     labels[sandbox.LabelTask],
		Deployment: labels[sandbox.LabelDeployment],
		Created:    created,
		OwnerPID:   pid,
		OwnerHost:  labels[sandbox.LabelOwnerHost],
		OwnerStart: start,
	}, nil
}

// lchown gives p (never following a symlink) to the configured owner.
func (m *Manager) lchown(root *os.Root, p string) error {
	if m.cfg.Owner == nil {
		return nil
	}
	return root.Lchown(p, m.cfg.Owner.UID, m.cfg.Owner.GID)
}

// fchown gives an open file to the configured owner.
func (m *Manager) fchown(f *os.File) error {
	if m.cfg.Owner == nil {
		return nil
	}
	return f.Chown(m.cfg.Owner.UID, m.cfg.Owner.GID)
}

// chownTree gives everything under dir in root to the owner, except paths
// for which skip returns true. Symlinks are changed, never followed.
func (m *Manager) chownTree(root *os.Root, dir string, skip func(string) bool) error {
	if m.cfg.Owner == nil {
		return nil
	}
	return fs.WalkDir(root.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if skip != nil && skip(p) {
			return nil
		}
		return m.lchown(root, p)
	})
}

// linkIntoWorkspace says whether a pack file may be shared by hard link
// with a working tree's .git: only when the sandbox runs as a known user
// who neither owns the inode nor may write to it (a read-only file owned
// by someone else), so a task cannot corrupt the mirror or other tasks.
// Otherwise packs are copied.
func (m *Manager) linkIntoWorkspace(fi fs.FileInfo) bool {
	perm := fi.Mode().Perm()
	if m.cfg.Owner == nil || perm&0o222 != 0 || perm&0o004 == 0 {
		return false
	}
	st, ok := sysStat(fi)
	return ok && int(st.uid) != m.cfg.Owner.UID
}
