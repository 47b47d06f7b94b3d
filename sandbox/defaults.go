package sandbox

import "strconv"

// The defaults of a sandbox, in one place: what a [Spec] that leaves a
// field zero gets from a backend (sandbox/docker), what the server's
// built-in policy gives a task (policy.Default), and who commands run as
// (the image recipe of sandbox/image, the workspace's owner in
// environment). docs/decisions.md lists them.
const (
	// DefaultImage is the image `wrench image build` produces, run when
	// nothing names another.
	DefaultImage = "wrench-sandbox:default"
	// DefaultMemoryBytes (no swap), DefaultNanoCPUs, DefaultPids and
	// DefaultDiskBytes (per writable area) are the resource limits.
	DefaultMemoryBytes int64 = 2 << 30
	DefaultNanoCPUs    int64 = 2e9
	DefaultPids        int64 = 512
	DefaultDiskBytes   int64 = 2 << 30
	// UID and GID are the unprivileged user every command runs as unless
	// it asks for root; HomeDir is its home.
	UID     = 1000
	GID     = 1000
	HomeDir = "/home/wrench"
)

// User is "UID:GID", the form a container engine takes.
func User() string { return strconv.Itoa(UID) + ":" + strconv.Itoa(GID) }
