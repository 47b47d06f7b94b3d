package main

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/queue/natsserver"
	"github.com/wrenchworks/wrench/sandbox/docker"
)

// defaultMinFreeDisk is --min-free-disk's default.
const defaultMinFreeDisk = "1GiB"

// infraProbe checks what every task of this worker needs of its own
// machine: the Docker engine answers, the policy's default image is there,
// and the data dir's file system has minFree bytes free. A worker whose
// probe fails takes no task until it passes (dispatcher.Config.Probe).
func infraProbe(prov *docker.Provider, pol *policy.Policy, dataDir string, minFree int64) func(context.Context) error {
	image := pol.Defaults.Image
	if image == "" {
		image = defaultImage
	}
	return func(ctx context.Context) error {
		if err := prov.Check(ctx, image); err != nil {
			return err
		}
		return checkFreeDisk(dataDir, minFree)
	}
}

// checkFreeDisk fails when the file system of dir has fewer than min bytes
// free for this user.
func checkFreeDisk(dir string, min int64) error {
	if min <= 0 {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("disk of %s: %w", dir, err)
	}
	if free := int64(st.Bavail) * int64(st.Bsize); free < min {
		return fmt.Errorf("disk of %s: %d MiB free, below the %d MiB --min-free-disk", dir, free>>20, min>>20)
	}
	return nil
}

// storeReady is the readiness of the queue's store, for /readyz: the
// connection is up, the embedded server (emb, nil with --nats) has room
// and has not lost its writes, and the store takes a probe's writes
// (queue.Conn.StoreReady, at most one probe per 5 s). A store that lost
// its writes on a full disk recovers by itself once there is room again
// (docs/reliability.md, "Disk full").
func storeReady(conn *queue.Conn, emb *natsserver.Server) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := conn.Ready(); err != nil {
			return err
		}
		if emb != nil {
			if err := emb.Health(); err != nil {
				return err
			}
		}
		return conn.StoreReady(ctx)
	}
}
