package workspace

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// initBare creates an empty bare repository at dir.
func initBare(dir string) error {
	for _, d := range []string{"objects/pack", "objects/info", "refs/heads", "refs/tags"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	files := map[string]string{
		"HEAD":   "ref: refs/heads/main\n",
		"config": "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// linkObjects makes every object of the repository at srcDir available in
// the one at dstDir: pack files are hard-linked when canLink allows (and
// the file system does), copied otherwise; loose objects are copied. It
// returns the paths (relative to dstDir) it linked.
func linkObjects(srcDir, dstDir string, canLink func(fs.FileInfo) bool) ([]string, error) {
	var linked []string
	srcPack := filepath.Join(srcDir, "objects", "pack")
	dstPack := filepath.Join(dstDir, "objects", "pack")
	des, err := os.ReadDir(srcPack)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	// .pack before .idx: a pack is only used once its index exists.
	sort.Slice(des, func(i, j int) bool {
		return strings.HasSuffix(des[i].Name(), ".pack") && !strings.HasSuffix(des[j].Name(), ".pack")
	})
	for _, de := range des {
		name := de.Name()
		if !strings.HasPrefix(name, "pack-") || !(strings.HasSuffix(name, ".pack") || strings.HasSuffix(name, ".idx")) {
			continue
		}
		src, dst := filepath.Join(srcPack, name), filepath.Join(dstPack, name)
		if fi, err := os.Stat(src); err == nil && canLink(fi) {
			if err := os.Link(src, dst); err == nil {
				linked = append(linked, filepath.Join("objects", "pack", name))
				continue
			} else if errors.Is(err, fs.ErrExist) {
				continue
			}
		}
		if err := copyFile(src, dst, 0o444); err != nil {
			return nil, fmt.Errorf("copy %s: %w", name, err)
		}
	}
	objDir := filepath.Join(srcDir, "objects")
	subs, err := os.ReadDir(objDir)
	if err != nil {
		return nil, err
	}
	for _, sub := range subs {
		if len(sub.Name()) != 2 || !sub.IsDir() || !isHex(sub.Name()) {
			continue
		}
		files, err := os.ReadDir(filepath.Join(objDir, sub.Name()))
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			continue
		}
		if err := os.MkdirAll(filepath.Join(dstDir, "objects", sub.Name()), 0o755); err != nil {
			return nil, err
		}
		for _, f := range files {
			rel := filepath.Join("objects", sub.Name(), f.Name())
			if err := copyFile(filepath.Join(srcDir, rel), filepath.Join(dstDir, rel), 0o444); err != nil {
				return nil, err
			}
		}
	}
	if data, err := os.ReadFile(filepath.Join(srcDir, "shallow")); err == nil {
		if err := os.WriteFile(filepath.Join(dstDir, "shallow"), data, 0o644); err != nil {
			return nil, err
		}
	}
	return linked, nil
}

// workGitDir is what the working tree's .git says about the checkout.
type workGitDir struct {
	// branch is the local branch HEAD points to ("" for a detached HEAD).
	branch string
	commit plumbing.Hash
	// refs are written to packed-refs (remote-tracking branch, tag).
	refs map[plumbing.ReferenceName]plumbing.Hash
	// originURL is the credential-free URL of origin.
	originURL string
}

// writeWorkGitDir writes the non-object parts of a working tree's .git:
// HEAD, config, refs. The token is never written: origin has a plain URL.
func writeWorkGitDir(gitDir string, g workGitDir) error {
	for _, d := range []string{"objects/pack", "objects/info", "refs/heads", "refs/tags", "refs/remotes", "info"} {
		if err := os.MkdirAll(filepath.Join(gitDir, d), 0o755); err != nil {
			return err
		}
	}
	head := g.commit.String() + "\n"
	refs := map[plumbing.ReferenceName]plumbing.Hash{}
	for k, v := range g.refs {
		refs[k] = v
	}
	var cfg strings.Builder
	cfg.WriteString("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n")
	fmt.Fprintf(&cfg, "[remote \"origin\"]\n\turl = %s\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n", configValue(g.originURL))
	if g.branch != "" {
		head = "ref: refs/heads/" + g.branch + "\n"
		refs[plumbing.NewBranchReferenceName(g.branch)] = g.commit
		fmt.Fprintf(&cfg, "[branch %s]\n\tremote = origin\n\tmerge = refs/heads/%s\n", configValue(g.branch), g.branch)
	}
	names := make([]string, 0, len(refs))
	for n := range refs {
		names = append(names, string(n))
	}
	sort.Strings(names)
	var packed strings.Builder
	for _, n := range names {
		fmt.Fprintf(&packed, "%s %s\n", refs[plumbing.ReferenceName(n)], n)
	}
	files := map[string]string{
		"HEAD":        head,
		"config":      cfg.String(),
		"packed-refs": packed.String(),
		"description": "Wrench workspace\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(gitDir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// configValue quotes a git config value (or subsection name).
func configValue(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", " ")
	return `"` + r.Replace(s) + `"`
}

// writeIndex writes the working tree's index, so git inside the sandbox
// sees a clean checkout without re-reading every file.
func writeIndex(gitDir string, entries []*index.Entry) error {
	f, err := os.OpenFile(filepath.Join(gitDir, "index"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	idx := &index.Index{Version: 2, Entries: entries}
	if err := index.NewEncoder(bw).Encode(idx); err != nil {
		f.Close()
		return fmt.Errorf("write index: %w", err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write index: %w", err)
	}
	return f.Close()
}

// anyFile allows hard links between host-only repositories.
func anyFile(fs.FileInfo) bool { return true }
