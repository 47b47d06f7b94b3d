package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

// startSupervisor starts the goroutine that enforces the wall-clock
// lifetime and, for a host workspace, the disk limit. Close stops it and
// waits for it. It keeps only the values of start, the context the
// sandbox was started with (a task's: its lines then say its trace).
func (s *Sandbox) startSupervisor(start context.Context) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(start))
	s.stop = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.supervise(ctx)
	}()
}

func (s *Sandbox) supervise(ctx context.Context) {
	life := time.NewTimer(s.remainingLife())
	defer life.Stop()
	// The workspace is a bind mount or in the container's own writable
	// layer: no engine quota applies on this storage driver, so it is
	// measured (tmpfs areas are bounded by their size= option; a single
	// file by the shim's RLIMIT_FSIZE).
	var watch <-chan time.Time
	var watchTimer *time.Timer
	if (s.spec.WorkspaceDir != "" || s.spec.WritableRoot) && s.spec.DiskBytes > 0 {
		watchTimer = time.NewTimer(0)
		defer watchTimer.Stop()
		watch = watchTimer.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.client.Done():
			return // the stream ended; calls report why
		case <-s.poke:
			if !life.Stop() {
				select {
				case <-life.C:
				default:
				}
			}
			life.Reset(s.remainingLife())
		case <-life.C:
			s.mu.Lock()
			lifetime := s.lifetime
			s.mu.Unlock()
			s.fail(sbErr(sandbox.ErrLimit, "call", fmt.Errorf("sandbox lifetime %s exceeded", lifetime)))
			s.p.cfg.Logger.InfoContext(ctx, "sandbox lifetime exceeded", "id", shortID(s.id), "task_id", s.spec.TaskID, "lifetime", lifetime)
			s.kill()
			return
		case <-watch:
			begin := time.Now()
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			used, err := s.diskUsed(cctx)
			cancel()
			if err == nil && used > s.spec.DiskBytes {
				s.fail(sbErr(sandbox.ErrLimit, "call", fmt.Errorf("the sandbox's disk use exceeded %d MB (used %d MB)", s.spec.DiskBytes/1e6, used/1e6)))
				s.p.cfg.Logger.InfoContext(ctx, "sandbox workspace over limit", "id", shortID(s.id), "task_id", s.spec.TaskID, "used", used, "limit", s.spec.DiskBytes)
				s.kill()
				return
			}
			// A slow measurement (a huge tree) is not repeated back to back.
			watchTimer.Reset(max(s.p.cfg.WatchInterval, 5*time.Since(begin)))
		}
	}
}

func (s *Sandbox) remainingLife() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(time.Until(s.started.Add(s.lifetime)), 0)
}
