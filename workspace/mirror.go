package workspace

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/wrenchworks/wrench/task"
)

// A mirror is a bare repository per host and repository path under
// Config.MirrorDir, holding every branch and tag with full history:
//
//	<MirrorDir>/<host>/<path>-<hash>/lock         flock: one writer at a time
//	                                 /repo.git/    the bare mirror
//	                                 /checkouts/<tree>/{manifest,blobs.N}
//
// A checkout is a tree's files concatenated into a few blob files plus a
// manifest (path, mode, hash, file, offset, size): copying ranges is
// much faster than decoding packed objects, and is what makes a second
// workspace of the same commit cheap. Workspaces get the mirror's packs by
// hard link (read-only files the sandbox user does not own) or by copy; no
// alternates file points outside the workspace, so git works inside the
// sandbox.

// mirror is a locked mirror directory.
type mirror struct {
	dir  string
	repo string
	lock *fileLock
}

// lockMirror takes the mirror's lock (exclusive) and cleans up what an
// interrupted build left.
func (m *Manager) lockMirror(ctx context.Context, src source) (*mirror, error) {
	dir := filepath.Join(m.cfg.MirrorDir, src.mirrorKey)
	if err := os.MkdirAll(filepath.Join(dir, "checkouts"), 0o700); err != nil {
		return nil, err
	}
	lk, err := lockFile(ctx, filepath.Join(dir, "lock"), true)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{dir, filepath.Join(dir, "checkouts")} {
		if des, err := os.ReadDir(d); err == nil {
			for _, de := range des {
				if strings.HasPrefix(de.Name(), "tmp-") {
					_ = os.RemoveAll(filepath.Join(d, de.Name()))
				}
			}
		}
	}
	return &mirror{dir: dir, repo: filepath.Join(dir, "repo.git"), lock: lk}, nil
}

func tmpName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "tmp-" + hex.EncodeToString(b[:])
}

// sync makes sure the mirror holds the commit repo asks for, fetching only
// when it does not (https sources are always asked for their refs, which
// also checks the credentials). It returns the plan, the commit and what
// happened: "created", "updated" or "reused".
func (mr *mirror) sync(ctx context.Context, f fetcher, src source, repo task.Repo) (plan, *object.Commit, string, error) {
	refs, head, err := f.refs(ctx)
	if err != nil {
		return plan{}, nil, "", cloneErr(src, "list refs", err)
	}
	p, err := makePlan(repo, refs, head)
	if err != nil {
		return p, nil, "", permanent(src, "resolve ref", err)
	}
	state := "reused"
	if _, err := os.Stat(filepath.Join(mr.repo, "HEAD")); err != nil {
		tmp := filepath.Join(mr.dir, tmpName())
		if err := initBare(tmp); err != nil {
			return p, nil, "", cloneErr(src, "create mirror", err)
		}
		st := openStorage(tmp, 16<<20)
		err := f.fetchAll(ctx, st, tmp)
		st.Close()
		if err != nil {
			_ = os.RemoveAll(tmp)
			return p, nil, "", cloneErr(src, "fetch", err)
		}
		if err := os.Rename(tmp, mr.repo); err != nil {
			return p, nil, "", cloneErr(src, "create mirror", err)
		}
		state = "created"
	}
	st := openStorage(mr.repo, 16<<20)
	defer st.Close()
	c, err := resolveCommit(st, p)
	if err != nil && state == "reused" {
		if err := f.fetchAll(ctx, st, mr.repo); err != nil {
			return p, nil, "", cloneErr(src, "fetch", err)
		}
		st.ObjectStorage.Reindex()
		state = "updated"
		c, err = resolveCommit(st, p)
	}
	if err != nil && !p.fullCommit().IsZero() {
		// A commit no branch or tag reaches (a pull request's head, say).
		if hf, ok := f.(*httpsFetcher); ok {
			spec := p.fullCommit().String() + ":refs/wrench/commits/" + p.fullCommit().String()
			if hf.fetch(ctx, st, []config.RefSpec{config.RefSpec(spec)}, 0) == nil {
				st.ObjectStorage.Reindex()
				c, err = resolveCommit(st, p)
			}
		}
	}
	if err != nil {
		return p, nil, state, cloneErr(src, "resolve commit", err)
	}
	return p, c, state, nil
}

// checkout returns the cached checkout of tree, building it from the
// mirror's objects when missing, and evicts the least recently used
// checkouts beyond keep.
func (mr *mirror) checkout(ctx context.Context, tree plumbing.Hash, keep int) (*checkoutCache, error) {
	dir := filepath.Join(mr.dir, "checkouts", tree.String())
	c, err := loadCheckout(dir)
	if err != nil {
		if err := buildCheckout(ctx, mr.repo, tree, dir); err != nil {
			return nil, err
		}
		var lerr error
		if c, lerr = loadCheckout(dir); lerr != nil {
			return nil, lerr
		}
	}
	now := time.Now()
	_ = os.Chtimes(filepath.Join(dir, "manifest"), now, now)
	mr.evict(keep, tree.String())
	return c, nil
}

// evict removes the least recently used checkouts beyond keep.
func (mr *mirror) evict(keep int, current string) {
	des, err := os.ReadDir(filepath.Join(mr.dir, "checkouts"))
	if err != nil {
		return
	}
	type used struct {
		name string
		at   time.Time
	}
	var all []used
	for _, de := range des {
		if strings.HasPrefix(de.Name(), "tmp-") || de.Name() == current {
			continue
		}
		fi, err := os.Stat(filepath.Join(mr.dir, "checkouts", de.Name(), "manifest"))
		if err != nil {
			continue
		}
		all = append(all, used{de.Name(), fi.ModTime()})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].at.After(all[j].at) })
	for i, u := range all {
		if i+1 >= keep {
			_ = os.RemoveAll(filepath.Join(mr.dir, "checkouts", u.name))
		}
	}
}

// checkoutCache is a loaded checkout: the flattened tree (directories
// included) and where each file's content is in the blob file.
type checkoutCache struct {
	dir   string
	flat  flatTree
	dirs  []string
	files []fileSpec
}

const manifestMagic = "wrench-checkout-2\n"

// cacheParts is how many blob files (and decoding goroutines, each with
// its own go-git storage) a checkout is built with.
const cacheParts = 4

// blobLoc is where a blob's content is in a checkout's blob files.
type blobLoc struct {
	part      int
	off, size int64
}

// buildCheckout writes tree's checkout to dir (through a temporary
// directory, so a crash leaves no half-written checkout): the blobs are
// decoded by cacheParts goroutines into blobs.<part> files.
func buildCheckout(ctx context.Context, repoDir string, tree plumbing.Hash, dir string) error {
	st := openStorage(repoDir, 16<<20)
	flat, err := flatten(st, tree)
	st.Close()
	if err != nil {
		return err
	}
	paths := flat.sortedPaths()
	var unique []plumbing.Hash
	seen := map[plumbing.Hash]bool{}
	for _, p := range paths {
		e := flat[p]
		if e.Mode != filemode.Dir && e.Mode != filemode.Submodule && !seen[e.Hash] {
			seen[e.Hash] = true
			unique = append(unique, e.Hash)
		}
	}
	tmp := filepath.Join(filepath.Dir(dir), tmpName())
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	locs := make([]blobLoc, len(unique))
	chunk := (len(unique) + cacheParts - 1) / cacheParts
	errs := make([]error, cacheParts)
	var wg sync.WaitGroup
	for part := range cacheParts {
		lo, hi := min(len(unique), part*chunk), min(len(unique), (part+1)*chunk)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[part] = decodeBlobs(ctx, repoDir, unique[lo:hi], locs[lo:hi], part, filepath.Join(tmp, fmt.Sprintf("blobs.%d", part)))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	where := make(map[plumbing.Hash]blobLoc, len(unique))
	for i, h := range unique {
		where[h] = locs[i]
	}
	var man []byte
	man = append(man, manifestMagic...)
	man = binary.AppendUvarint(man, uint64(len(flat)))
	for _, p := range paths {
		e := flat[p]
		loc := where[e.Hash]
		man = binary.AppendUvarint(man, uint64(e.Mode))
		man = append(man, e.Hash[:]...)
		man = binary.AppendUvarint(man, uint64(loc.part))
		man = binary.AppendUvarint(man, uint64(loc.off))
		man = binary.AppendUvarint(man, uint64(loc.size))
		man = binary.AppendUvarint(man, uint64(len(p)))
		man = append(man, p...)
	}
	if err := os.WriteFile(filepath.Join(tmp, "manifest"), man, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// decodeBlobs appends the content of hashes to the file at path and
// records where each went.
func decodeBlobs(ctx context.Context, repoDir string, hashes []plumbing.Hash, locs []blobLoc, part int, path string) error {
	st := openStorage(repoDir, 32<<20)
	defer st.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	var off int64
	for i, h := range hashes {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		o, err := st.EncodedObject(plumbing.BlobObject, h)
		if err != nil {
			return fmt.Errorf("read blob %s: %w", h, err)
		}
		r, err := o.Reader()
		if err != nil {
			return err
		}
		n, err := io.Copy(bw, r)
		r.Close()
		if err != nil {
			return err
		}
		locs[i] = blobLoc{part: part, off: off, size: n}
		off += n
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// loadCheckout reads a checkout's manifest.
func loadCheckout(dir string) (*checkoutCache, error) {
	data, err := os.ReadFile(filepath.Join(dir, "manifest"))
	if err != nil {
		return nil, err
	}
	bad := fmt.Errorf("checkout %s: corrupt manifest", dir)
	if !strings.HasPrefix(string(data), manifestMagic) {
		return nil, bad
	}
	data = data[len(manifestMagic):]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(data)
		if n <= 0 {
			return 0, false
		}
		data = data[n:]
		return v, true
	}
	count, ok := next()
	if !ok || count > 1<<26 {
		return nil, bad
	}
	c := &checkoutCache{dir: dir, flat: make(flatTree, count)}
	for i := uint64(0); i < count; i++ {
		mode, ok1 := next()
		if !ok1 || len(data) < 20 {
			return nil, bad
		}
		var h plumbing.Hash
		copy(h[:], data[:20])
		data = data[20:]
		part, ok5 := next()
		off, ok2 := next()
		size, ok3 := next()
		plen, ok4 := next()
		if !ok2 || !ok3 || !ok4 || !ok5 || part >= cacheParts || uint64(len(data)) < plen {
			return nil, bad
		}
		p := string(data[:plen])
		data = data[plen:]
		fm := filemode.FileMode(mode)
		c.flat[p] = entry{Mode: fm, Hash: h}
		switch fm {
		case filemode.Dir:
			c.dirs = append(c.dirs, p)
		case filemode.Submodule:
			c.dirs = append(c.dirs, p)
			c.files = append(c.files, fileSpec{path: p, mode: fm, hash: h})
		default:
			c.files = append(c.files, fileSpec{path: p, mode: fm, hash: h, part: int(part), off: int64(off), size: int64(size)})
		}
	}
	return c, nil
}
