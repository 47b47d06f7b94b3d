package workspace

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/wrenchworks/wrench/diff"
	"github.com/wrenchworks/wrench/sandbox"
)

// change is one file-level difference between two trees. A rename or copy
// has both paths; an addition has only to, a deletion only from.
type change struct {
	from, to   string
	old, new   entry
	similarity int // percent, for renames
}

// compareTrees lists file changes from a to b (directories are implied by
// their files; submodule entries are not compared). A path whose kind
// changes (file to symlink, say) is a deletion and an addition, as in git.
func compareTrees(a, b flatTree) []change {
	var out []change
	for p, ea := range a {
		if ea.isDir() || ea.Mode == filemode.Submodule {
			continue
		}
		eb, ok := b[p]
		switch {
		case !ok || eb.isDir() || eb.Mode == filemode.Submodule:
			out = append(out, change{from: p, old: ea})
		case kind(ea.Mode) != kind(eb.Mode):
			out = append(out, change{from: p, old: ea}, change{to: p, new: eb})
		case ea != eb:
			out = append(out, change{from: p, to: p, old: ea, new: eb})
		}
	}
	for p, eb := range b {
		if eb.isDir() || eb.Mode == filemode.Submodule {
			continue
		}
		if ea, ok := a[p]; !ok || ea.isDir() || ea.Mode == filemode.Submodule {
			out = append(out, change{to: p, new: eb})
		}
	}
	sortChanges(out)
	return out
}

// sortChanges orders changes by path, deletions before additions of the
// same path (what git apply expects for a type change).
func sortChanges(cs []change) {
	key := func(c change) string {
		if c.to != "" {
			return c.to
		}
		return c.from
	}
	sort.SliceStable(cs, func(i, j int) bool {
		ki, kj := key(cs[i]), key(cs[j])
		if ki != kj {
			return ki < kj
		}
		return cs[i].to == "" && cs[j].to != ""
	})
}

// renameLimit bounds inexact rename detection (deleted x added files).
const renameLimit = 400 * 400

// detectRenames pairs deletions with additions: first identical content
// (empty files excepted), then content at least 50% similar, best first.
func detectRenames(s storer.EncodedObjectStorer, cs []change) ([]change, error) {
	var dels, adds []int
	for i, c := range cs {
		switch {
		case c.to == "" && kind(c.old.Mode) != 4:
			dels = append(dels, i)
		case c.from == "" && kind(c.new.Mode) != 4:
			adds = append(adds, i)
		}
	}
	if len(dels) == 0 || len(adds) == 0 {
		return cs, nil
	}
	used := map[int]bool{}
	pair := func(d, a, sim int) {
		cs[a].from, cs[a].old, cs[a].similarity = cs[d].from, cs[d].old, sim
		used[d], used[a] = true, true
	}
	byHash := map[plumbing.Hash][]int{}
	for _, d := range dels {
		if cs[d].old.Hash != emptyBlob {
			byHash[cs[d].old.Hash] = append(byHash[cs[d].old.Hash], d)
		}
	}
	for _, a := range adds {
		for _, d := range byHash[cs[a].new.Hash] {
			if !used[d] && kind(cs[d].old.Mode) == kind(cs[a].new.Mode) {
				pair(d, a, 100)
				break
			}
		}
	}
	var restD, restA []int
	for _, d := range dels {
		if !used[d] && kind(cs[d].old.Mode) == 1 {
			restD = append(restD, d)
		}
	}
	for _, a := range adds {
		if !used[a] && kind(cs[a].new.Mode) == 1 {
			restA = append(restA, a)
		}
	}
	if len(restD) > 0 && len(restA) > 0 && len(restD)*len(restA) <= renameLimit {
		type cand struct{ d, a, score int }
		var cands []cand
		sigs := map[plumbing.Hash]*signature{}
		sig := func(h plumbing.Hash) (*signature, error) {
			if sg, ok := sigs[h]; ok {
				return sg, nil
			}
			data, err := readBlob(s, h)
			if err != nil {
				return nil, err
			}
			sg := newSignature(data)
			sigs[h] = sg
			return sg, nil
		}
		for _, d := range restD {
			sd, err := sig(cs[d].old.Hash)
			if err != nil {
				return nil, err
			}
			for _, a := range restA {
				sa, err := sig(cs[a].new.Hash)
				if err != nil {
					return nil, err
				}
				if score := similarity(sd, sa); score >= 50 {
					cands = append(cands, cand{d, a, score})
				}
			}
		}
		sort.SliceStable(cands, func(i, j int) bool { return cands[i].score > cands[j].score })
		for _, c := range cands {
			if !used[c.d] && !used[c.a] {
				pair(c.d, c.a, c.score)
			}
		}
	}
	out := cs[:0:0]
	for i, c := range cs {
		if c.to == "" && used[i] {
			continue // the deletion became part of a rename
		}
		out = append(out, c)
	}
	sortChanges(out)
	return out, nil
}

var emptyBlob = blobHash(nil)

// signature summarizes content as chunks (lines, or 64-byte pieces of long
// lines) and their byte counts, for similarity scores.
type signature struct {
	size   int
	chunks map[string]int
}

func newSignature(data []byte) *signature {
	s := &signature{size: len(data), chunks: map[string]int{}}
	for len(data) > 0 {
		n := bytes.IndexByte(data, '\n') + 1
		if n == 0 || n > 64 {
			n = min(64, len(data))
		}
		s.chunks[string(data[:n])] += n
		data = data[n:]
	}
	return s
}

// similarity is the percentage of the larger side's bytes found in both.
func similarity(a, b *signature) int {
	big := max(a.size, b.size)
	if big == 0 || min(a.size, b.size)*2 < big {
		return 0
	}
	common := 0
	for k, na := range a.chunks {
		if nb, ok := b.chunks[k]; ok {
			common += min(na, nb)
		}
	}
	return common * 100 / big
}

// DefaultMaxDiffFile is the largest file (either side of a change) a
// patch includes; larger ones are left out and named (see PartialDiff).
const DefaultMaxDiffFile = 32 << 20

// PartialDiff is the error of a Diff that left out files too large to
// include: the patch returned with it is valid and holds everything else.
type PartialDiff struct {
	// TooLarge are the paths left out.
	TooLarge []string
	Limit    int64
}

// Is makes a PartialDiff match sandbox.ErrPartialPatch.
func (e *PartialDiff) Is(target error) bool { return target == sandbox.ErrPartialPatch }

func (e *PartialDiff) Error() string {
	return fmt.Sprintf("the patch leaves out %d file(s) over %d MB, changed but too large to include: %s",
		len(e.TooLarge), e.Limit>>20, strings.Join(e.TooLarge, ", "))
}

// formatPatch renders the changes from a to b as a git unified diff. A
// change whose old or new content is over maxFile bytes is left out
// (never read) and reported in a *PartialDiff returned with the patch.
func formatPatch(ctx context.Context, s storer.EncodedObjectStorer, a, b flatTree, maxFile int64) (string, error) {
	cs, err := detectRenames(s, compareTrees(a, b))
	if err != nil {
		return "", err
	}
	var out strings.Builder
	var tooLarge []string
	for _, c := range cs {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if big, err := overSize(s, c, maxFile); err != nil {
			return "", err
		} else if big {
			tooLarge = append(tooLarge, firstNonEmpty(c.to, c.from))
			continue
		}
		if err := writeFilePatch(&out, s, c); err != nil {
			return "", err
		}
	}
	if len(tooLarge) > 0 {
		return out.String(), &PartialDiff{TooLarge: tooLarge, Limit: maxFile}
	}
	return out.String(), nil
}

// overSize reports whether either side of c is a blob over max bytes.
func overSize(s storer.EncodedObjectStorer, c change, max int64) (bool, error) {
	if max <= 0 {
		return false, nil
	}
	for _, side := range []struct {
		path string
		e    entry
	}{{c.from, c.old}, {c.to, c.new}} {
		if side.path == "" || side.e.Mode == filemode.Symlink {
			continue
		}
		o, err := s.EncodedObject(plumbing.BlobObject, side.e.Hash)
		if err != nil {
			return false, fmt.Errorf("read blob %s: %w", side.e.Hash, err)
		}
		if o.Size() > max {
			return true, nil
		}
	}
	return false, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// writeFilePatch writes one file's section: the extended header git apply
// reads, then text hunks or a binary patch.
func writeFilePatch(out *strings.Builder, s storer.EncodedObjectStorer, c change) error {
	from, to := c.from, c.to
	if from == "" {
		from = to
	}
	if to == "" {
		to = from
	}
	fmt.Fprintf(out, "diff --git %s %s\n", diff.QuotePath("a/"+from), diff.QuotePath("b/"+to))
	var oldData, newData []byte
	var err error
	if c.from != "" {
		if oldData, err = readBlob(s, c.old.Hash); err != nil {
			return err
		}
	}
	if c.to != "" {
		if newData, err = readBlob(s, c.new.Hash); err != nil {
			return err
		}
	}
	zero := plumbing.ZeroHash.String()
	switch {
	case c.from == "":
		fmt.Fprintf(out, "new file mode %06o\n", uint32(c.new.Mode))
		fmt.Fprintf(out, "index %s..%s\n", zero, c.new.Hash)
	case c.to == "":
		fmt.Fprintf(out, "deleted file mode %06o\n", uint32(c.old.Mode))
		fmt.Fprintf(out, "index %s..%s\n", c.old.Hash, zero)
	default:
		if c.from != c.to {
			fmt.Fprintf(out, "similarity index %d%%\nrename from %s\nrename to %s\n",
				c.similarity, diff.QuotePath(c.from), diff.QuotePath(c.to))
		}
		if c.old.Mode != c.new.Mode {
			fmt.Fprintf(out, "old mode %06o\nnew mode %06o\n", uint32(c.old.Mode), uint32(c.new.Mode))
		}
		if c.old.Hash == c.new.Hash {
			return nil
		}
		fmt.Fprintf(out, "index %s..%s", c.old.Hash, c.new.Hash)
		if c.old.Mode == c.new.Mode {
			fmt.Fprintf(out, " %06o", uint32(c.new.Mode))
		}
		out.WriteByte('\n')
	}
	if len(oldData) == 0 && len(newData) == 0 {
		return nil
	}
	if diff.IsBinary(oldData) || diff.IsBinary(newData) {
		diff.WriteBinary(out, oldData, newData)
		return nil
	}
	oldName, newName := "/dev/null", "/dev/null"
	if c.from != "" {
		oldName = diff.QuotePath("a/" + c.from)
	}
	if c.to != "" {
		newName = diff.QuotePath("b/" + c.to)
	}
	fmt.Fprintf(out, "--- %s\n+++ %s\n", oldName, newName)
	diff.WriteHunks(out, diff.SplitLines(string(oldData)), diff.SplitLines(string(newData)))
	return nil
}
