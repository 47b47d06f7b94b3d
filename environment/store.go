package environment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

// Labels on every snapshot image.
const (
	LabelKey       = "dev.wrench.env.key"        // the environment key
	LabelRepo      = "dev.wrench.env.repo"       // the repository URL (credential-free)
	LabelCommit    = "dev.wrench.env.commit"     // the commit its tree is at
	LabelBase      = "dev.wrench.env.base"       // the base image's content id
	LabelBaseImage = "dev.wrench.env.base-image" // the base image's name
)

// ImageRepo is the repository name of snapshot images.
const ImageRepo = "wrench-env"

// ImageRef is the image name of the snapshot of key in a deployment:
// wrench-env:<deployment>-<key prefix>, so deployments sharing an engine
// keep, list and prune their own.
func ImageRef(deployment, key string) string {
	return ImageRepo + ":" + tagSafe(deployment) + "-" + key[:min(len(key), 24)]
}

// tagSafe turns a deployment name into characters a tag allows.
func tagSafe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// ImageStore lists, describes and removes local images.
type ImageStore interface {
	InspectImage(ctx context.Context, ref string) (sandbox.Image, bool, error)
	// Images lists the images carrying every one of labels ("key" or
	// "key=value").
	Images(ctx context.Context, labels ...string) ([]sandbox.Image, error)
	RemoveImage(ctx context.Context, ref string) error
}

// Snapshot is one saved environment.
type Snapshot struct {
	Key     string    `json:"key"`
	Image   string    `json:"image"`
	ImageID string    `json:"image_id"`
	Repo    string    `json:"repo,omitempty"`
	Commit  string    `json:"commit,omitempty"`
	Base    string    `json:"base_image,omitempty"`
	OwnSize int64     `json:"own_size"`
	Created time.Time `json:"created"`
	// LastUsed is when a task last started from it (Created when never).
	LastUsed time.Time `json:"last_used"`
	Uses     int       `json:"uses"`
}

// Store keeps track of snapshots: the images, and an index in a directory
// of when each was last used. Builds of one key take turns through a lock
// file there, across processes.
type Store struct {
	images     ImageStore
	dir        string
	deployment string
	mu         sync.Mutex // the index file, within this process
}

// NewStore returns the store of deployment's snapshots over images, with
// its index in dir (created).
func NewStore(images ImageStore, dir, deployment string) (*Store, error) {
	if deployment == "" {
		return nil, errors.New("environment store: a deployment name is required")
	}
	if err := os.MkdirAll(filepath.Join(dir, "locks"), 0o700); err != nil {
		return nil, fmt.Errorf("environment store: %w", err)
	}
	return &Store{images: images, dir: dir, deployment: deployment}, nil
}

// Ref is the image name of the snapshot of key in this store.
func (s *Store) Ref(key string) string { return ImageRef(s.deployment, key) }

// Deployment is the deployment whose snapshots the store keeps.
func (s *Store) Deployment() string { return s.deployment }

// usage is one index entry.
type usage struct {
	LastUsed time.Time `json:"last_used"`
	Uses     int       `json:"uses"`
}

// Lookup returns the snapshot of key, if there is one.
func (s *Store) Lookup(ctx context.Context, key string) (Snapshot, bool, error) {
	img, ok, err := s.images.InspectImage(ctx, s.Ref(key))
	if err != nil || !ok || img.Labels[LabelKey] != key || img.Labels[sandbox.LabelDeployment] != s.deployment {
		return Snapshot{}, false, err
	}
	return s.snapshot(img, s.readIndex()), true, nil
}

// List returns every snapshot, least recently used first.
func (s *Store) List(ctx context.Context) ([]Snapshot, error) {
	imgs, err := s.images.Images(ctx, LabelKey, sandbox.LabelDeployment+"="+s.deployment)
	if err != nil {
		return nil, err
	}
	idx := s.readIndex()
	bases := map[string]int64{}
	out := make([]Snapshot, 0, len(imgs))
	for _, img := range imgs {
		sn := s.snapshot(img, idx)
		// What a snapshot costs is what it adds to its base image, which
		// it shares with every other snapshot of that base.
		base := img.Labels[LabelBase]
		size, ok := bases[base]
		if !ok && base != "" {
			if bi, found, err := s.images.InspectImage(ctx, base); err == nil && found {
				size = bi.Size
			}
			bases[base] = size
		}
		if size > 0 && sn.OwnSize > size {
			sn.OwnSize -= size
		}
		out = append(out, sn)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastUsed.Before(out[j].LastUsed) })
	return out, nil
}

func (s *Store) snapshot(img sandbox.Image, idx map[string]usage) Snapshot {
	l := img.Labels
	sn := Snapshot{Key: l[LabelKey], ImageID: img.ID, Repo: l[LabelRepo], Commit: l[LabelCommit],
		Base: l[LabelBaseImage], Created: img.Created, LastUsed: img.Created}
	sn.Image = s.Ref(sn.Key)
	sn.OwnSize = img.Size
	if u, ok := idx[sn.Key]; ok {
		sn.LastUsed, sn.Uses = u.LastUsed, u.Uses
	}
	return sn
}

// Touch records that a task started from the snapshot of key.
func (s *Store) Touch(key string, now time.Time) error {
	return s.updateIndex(func(idx map[string]usage) {
		u := idx[key]
		u.LastUsed, u.Uses = now, u.Uses+1
		idx[key] = u
	})
}

// PruneOptions bound what the store keeps.
type PruneOptions struct {
	// MaxBytes is the budget for the snapshots' own sizes (what each adds
	// to its base image); 0 means no budget.
	MaxBytes int64
	// OlderThan removes snapshots not used for this long; 0 keeps them.
	OlderThan time.Duration
	// Keep are keys never removed (those tasks are starting from now).
	Keep map[string]bool
	Now  time.Time
}

// Prune removes snapshots not used within OlderThan, then the least
// recently used until the rest fit MaxBytes. A snapshot a running sandbox
// still uses is skipped. It returns what it removed.
func (s *Store) Prune(ctx context.Context, o PruneOptions) ([]Snapshot, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	list, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, sn := range list {
		total += sn.OwnSize
	}
	var removed []Snapshot
	var errs []error
	for _, sn := range list { // least recently used first
		old := o.OlderThan > 0 && o.Now.Sub(sn.LastUsed) > o.OlderThan
		over := o.MaxBytes > 0 && total > o.MaxBytes
		if o.Keep[sn.Key] || (!old && !over) {
			continue
		}
		if err := s.images.RemoveImage(ctx, sn.ImageID); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", sn.Image, err))
			continue
		}
		total -= sn.OwnSize
		removed = append(removed, sn)
	}
	if len(removed) > 0 {
		if err := s.updateIndex(func(idx map[string]usage) {
			for _, sn := range removed {
				delete(idx, sn.Key)
			}
		}); err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// Lock takes the build lock of key, waiting for another builder (in this
// process or another) to finish; unlock releases it.
func (s *Store) Lock(ctx context.Context, key string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(s.dir, "locks", key+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("environment lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("environment lock: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Store) indexPath() string { return filepath.Join(s.dir, "index.json") }

func (s *Store) readIndex() map[string]usage {
	idx := map[string]usage{}
	data, err := os.ReadFile(s.indexPath())
	if err == nil {
		_ = json.Unmarshal(data, &idx) // a damaged index only loses LRU order
	}
	return idx
}

// updateIndex changes the index under a file lock, atomically.
func (s *Store) updateIndex(change func(map[string]usage)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	lf, err := os.OpenFile(s.indexPath()+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("environment index: %w", err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("environment index: %w", err)
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	idx := s.readIndex()
	change(idx)
	data, err := json.Marshal(idx)
	if err != nil {
		return err
	}
	tmp := s.indexPath() + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("environment index: %w", err)
	}
	if err := os.Rename(tmp, s.indexPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("environment index: %w", err)
	}
	return nil
}
