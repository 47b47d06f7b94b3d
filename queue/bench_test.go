package queue_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue/natsserver"
)

// BenchmarkAdmission is the throughput of Submit from 8 concurrent
// submitters on the embedded server, syncing every write (what `wrench
// serve` runs) and with JetStream's lazy default: what durable admission
// costs. The file store must be on a disk (TMPDIR on tmpfs makes fsync
// free and the comparison meaningless).
func BenchmarkAdmission(b *testing.B) {
	for _, lazy := range []bool{false, true} {
		name := "sync_always"
		if lazy {
			name = "sync_lazy"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			var fs unix.Statfs_t
			if err := unix.Statfs(dir, &fs); err == nil && fs.Type == unix.TMPFS_MAGIC {
				b.Fatalf("%s is on tmpfs: set TMPDIR to a directory on disk", dir)
			}
			c := connect(b, natstest.Start(b, natsserver.Config{DataDir: dir, LazySync: lazy}))
			var n atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprintf("t-adm%d", n.Add(1))
					if _, _, err := c.Submissions().Submit(context.Background(), newTask(id)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
		})
	}
}
