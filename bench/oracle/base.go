package oracle

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// LocalBase reads files at commit from the repository at a local path (or
// file:// URL); it returns nil when the repository is not on this machine
// or lacks the commit, and the gold script is then written unchecked.
func LocalBase(repo, commit string) BaseReader {
	if strings.Contains(repo, "://") && !strings.HasPrefix(repo, "file://") {
		return nil
	}
	r, err := git.PlainOpenWithOptions(strings.TrimPrefix(repo, "file://"), &git.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return nil
	}
	c, err := r.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		return nil
	}
	return func(path string) ([]byte, error) {
		f, err := c.File(path)
		if errors.Is(err, object.ErrFileNotFound) {
			return nil, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
		}
		if err != nil {
			return nil, err
		}
		s, err := f.Contents()
		return []byte(s), err
	}
}
