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

// WorkspaceInfo is one task workspace directory on the host and what its
// labels say (see [ResourceLabels]): what the reaper needs to tell whose
// it is. The workspace manager lists them (workspace.Info).
type WorkspaceInfo struct {
	// Dir is the workspace's directory (the working tree and its private
	// state are inside it).
	Dir        string
	TaskID     string
	Deployment string
	Created    time.Time
	OwnerPID   int
	OwnerHost  string
	// OwnerStart is the owner process's start time in clock ticks after
	// boot (LabelOwnerStart; 0 when not labelled).
	OwnerStart uint64
}

// Container is one container of the engine as a listing shows it: enough
// for the reaper to tell, from its labels (LabelManaged, LabelTask, the
// owner labels), whose it is.
type Container struct {
	// ID is the engine's id for it.
	ID     string
	Labels map[string]string
	// Created is when the engine created it.
	Created time.Time
}
