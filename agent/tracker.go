package agent

import "crypto/sha256"

// readTracker remembers the content the model last saw of each file (it
// viewed or wrote it), so the write tools can refuse a file the model has
// not read, or one that changed since (read-before-edit). One run's view
// and write tools share one.
type readTracker struct {
	seen map[string][32]byte // path -> content hash
}

func newReadTracker() *readTracker {
	return &readTracker{seen: map[string][32]byte{}}
}

// contentHash identifies a file's content for stale detection.
func contentHash(b []byte) [32]byte { return sha256.Sum256(b) }

// saw records that the model has seen path with this content.
func (t *readTracker) saw(path string, data []byte) { t.seen[path] = contentHash(data) }

// forget drops path (deleted or moved away).
func (t *readTracker) forget(path string) { delete(t.seen, path) }

// check refuses a write to an existing file the model has not viewed, or
// that changed since it did.
func (t *readTracker) check(path string, current []byte) *toolResult {
	h, ok := t.seen[path]
	if !ok {
		r := errorResult("%s has not been read in this session. View it first (view %s), then edit.", path, path)
		return &r
	}
	if h != contentHash(current) {
		r := errorResult("%s has changed since you last viewed it (by a command, a rollback or another edit). View it again before editing.", path)
		return &r
	}
	return nil
}
