package workspace

import (
	"bytes"
	"crypto/sha1"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// emptyTree is the hash of the tree with no entries. Checkpoints record an
// empty directory as an entry pointing at it.
var emptyTree = plumbing.NewHash("4b825dc642cb6eb9a060e54bf8d69288fbee4904")

// openStorage opens a git directory (bare repository or .git) with go-git,
// confined to dir by go-billy's bound OS filesystem. Callers Close it.
func openStorage(dir string, cacheBytes cache.FileSize) *filesystem.Storage {
	return filesystem.NewStorageWithOptions(
		osfs.New(dir, osfs.WithBoundOS()),
		cache.NewObjectLRU(cacheBytes),
		filesystem.Options{KeepDescriptors: true},
	)
}

// blobHash is git's object id of a blob with this content.
func blobHash(data []byte) plumbing.Hash {
	h := sha1.New()
	h.Write(blobHeader(int64(len(data))))
	h.Write(data)
	var out plumbing.Hash
	copy(out[:], h.Sum(nil))
	return out
}

func blobHeader(size int64) []byte {
	return append(strconv.AppendInt([]byte("blob "), size, 10), 0)
}

// entry is one path of a flattened tree: a file, symlink, submodule or
// directory (whose hash is its tree's).
type entry struct {
	Mode filemode.FileMode
	Hash plumbing.Hash
}

func (e entry) isDir() bool { return e.Mode == filemode.Dir }

// flatTree maps slash-separated paths to entries, directories included.
type flatTree map[string]entry

// sortedPaths returns the paths of t in byte order, which puts every
// directory before its contents.
func (t flatTree) sortedPaths() []string {
	out := make([]string, 0, len(t))
	for p := range t {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// flatten reads tree h and everything below it into a flatTree.
func flatten(s storer.EncodedObjectStorer, h plumbing.Hash) (flatTree, error) {
	out := flatTree{}
	var walk func(prefix string, h plumbing.Hash) error
	walk = func(prefix string, h plumbing.Hash) error {
		t, err := object.GetTree(s, h)
		if err != nil {
			return fmt.Errorf("read tree %s: %w", h, err)
		}
		for _, e := range t.Entries {
			if !validName(e.Name) {
				return fmt.Errorf("tree %s: refusing entry %q", h, e.Name)
			}
			p := path.Join(prefix, e.Name)
			out[p] = entry{Mode: e.Mode, Hash: e.Hash}
			if e.Mode == filemode.Dir {
				if err := walk(p, e.Hash); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, walk("", h)
}

// validName refuses tree entry names that could escape a directory or
// overwrite the repository (".git" in any case).
func validName(name string) bool {
	if name == "" || name == "." || name == ".." || bytes.EqualFold([]byte(name), []byte(".git")) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '/' || name[i] == 0 {
			return false
		}
	}
	return true
}

// treeEntry is one entry of a tree being built.
type treeEntry struct {
	name string
	mode filemode.FileMode
	hash plumbing.Hash
}

// encodeTree builds the canonical tree object for entries (sorted the way
// git sorts them: a directory as if its name ended in "/").
func encodeTree(entries []treeEntry) *plumbing.MemoryObject {
	sort.Slice(entries, func(i, j int) bool {
		return treeSortKey(entries[i]) < treeSortKey(entries[j])
	})
	var buf bytes.Buffer
	for _, e := range entries {
		fmt.Fprintf(&buf, "%o %s", uint32(e.mode), e.name)
		buf.WriteByte(0)
		buf.Write(e.hash[:])
	}
	o := &plumbing.MemoryObject{}
	o.SetType(plumbing.TreeObject)
	_, _ = o.Write(buf.Bytes())
	return o
}

func treeSortKey(e treeEntry) string {
	if e.mode == filemode.Dir {
		return e.name + "/"
	}
	return e.name
}

// objectWriter stores objects in a repository, skipping those it knows are
// there already.
type objectWriter struct {
	st    *filesystem.Storage
	known map[plumbing.Hash]struct{}
}

func newObjectWriter(st *filesystem.Storage) *objectWriter {
	return &objectWriter{st: st, known: map[plumbing.Hash]struct{}{}}
}

// has reports whether the repository holds h.
func (w *objectWriter) has(h plumbing.Hash) bool {
	if _, ok := w.known[h]; ok {
		return true
	}
	if w.st.HasEncodedObject(h) == nil {
		w.known[h] = struct{}{}
		return true
	}
	return false
}

// put stores o unless it is present and returns its hash.
func (w *objectWriter) put(o plumbing.EncodedObject) (plumbing.Hash, error) {
	h := o.Hash()
	if w.has(h) {
		return h, nil
	}
	if _, err := w.st.SetEncodedObject(o); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store %s %s: %w", o.Type(), h, err)
	}
	w.known[h] = struct{}{}
	return h, nil
}

// putBlob stores data as a blob.
func (w *objectWriter) putBlob(data []byte) (plumbing.Hash, error) {
	h := blobHash(data)
	if w.has(h) {
		return h, nil
	}
	o := &plumbing.MemoryObject{}
	o.SetType(plumbing.BlobObject)
	_, _ = o.Write(data)
	return w.put(o)
}

// putBlobStream stores size bytes from r as a blob without holding them in
// memory, and returns the hash of what was stored.
func (w *objectWriter) putBlobStream(r io.Reader, size int64) (plumbing.Hash, error) {
	ow, header, err := w.st.LazyWriter()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if err := header(plumbing.BlobObject, size); err != nil {
		ow.Close()
		return plumbing.ZeroHash, err
	}
	if _, err := io.CopyN(ow, r, size); err != nil {
		ow.Close()
		return plumbing.ZeroHash, err
	}
	if err := ow.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	hw, ok := ow.(interface{ Hash() plumbing.Hash })
	if !ok {
		return plumbing.ZeroHash, errors.New("object writer does not report its hash")
	}
	h := hw.Hash()
	w.known[h] = struct{}{}
	return h, nil
}

// readBlob returns a blob's content.
func readBlob(s storer.EncodedObjectStorer, h plumbing.Hash) ([]byte, error) {
	o, err := s.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	r, err := o.Reader()
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	return data, nil
}
