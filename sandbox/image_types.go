package sandbox

import "time"

// Image describes a local image a backend can start sandboxes from.
type Image struct {
	// ID is the image's content id ("sha256:…").
	ID string
	// Tags are its names (repository:tag).
	Tags    []string
	Labels  map[string]string
	Size    int64
	Created time.Time
}
