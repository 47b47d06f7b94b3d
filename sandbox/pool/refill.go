package pool

import (
	"context"
	"time"
)

// run keeps the pool full until ctx is done: it refills after every
// hand-out, replaces idle sandboxes, and backs off while starts fail.
func (p *Pool) run(ctx context.Context) {
	check := time.NewTicker(min(p.cfg.MaxIdle/4+time.Millisecond, 30*time.Second))
	defer check.Stop()
	backoff := time.Duration(0)
	for {
		p.recycle(time.Now())
		if err := p.refill(ctx); err != nil {
			backoff = min(max(2*backoff, time.Second), time.Minute)
			wait := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				wait.Stop()
				return
			case <-wait.C:
			}
			continue
		}
		backoff = 0
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-check.C:
		}
	}
}

// refill starts sandboxes, one at a time, until every image has Size
// ready. It stops at the first failure.
func (p *Pool) refill(ctx context.Context) error {
	p.mu.Lock()
	images := p.images
	p.mu.Unlock()
	for _, img := range images {
		for {
			p.mu.Lock()
			n := len(p.ready[img])
			p.mu.Unlock()
			if n >= p.cfg.Size || ctx.Err() != nil {
				break
			}
			s, err := p.startWarm(ctx, img)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				p.count(func(st *Stats) { st.StartErrors++ })
				p.cfg.Logger.Warn("warm pool: start sandbox", "image", img, "err", err)
				return err
			}
			p.mu.Lock()
			if !contains(p.images, img) { // dropped by SetImages meanwhile
				p.mu.Unlock()
				p.discard(s)
				break
			}
			p.ready[img] = append(p.ready[img], s)
			p.mu.Unlock()
		}
	}
	return nil
}

func (p *Pool) startWarm(ctx context.Context, image string) (*slot, error) {
	spec := p.cfg.Template
	var dir string
	if !spec.WritableRoot {
		var err error
		if dir, err = p.newDir(); err != nil {
			return nil, err
		}
	}
	spec.Image, spec.WorkspaceDir, spec.TaskID, spec.Env, spec.Timeout = image, dir, WarmTaskID, nil, 0
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	defer cancel()
	sb, release, err := p.start(ctx, spec)
	if err != nil {
		removeDir(dir)
		return nil, err
	}
	return &slot{sb: sb, dir: dir, ready: time.Now(), release: release}, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// recycle closes ready sandboxes idle for longer than MaxIdle; refill
// replaces them.
func (p *Pool) recycle(now time.Time) {
	var old []*slot
	p.mu.Lock()
	for img, list := range p.ready {
		keep := list[:0]
		for _, s := range list {
			if now.Sub(s.ready) > p.cfg.MaxIdle {
				old = append(old, s)
			} else {
				keep = append(keep, s)
			}
		}
		p.ready[img] = keep
	}
	p.stats.Recycled += uint64(len(old))
	p.mu.Unlock()
	for _, s := range old {
		p.discard(s)
	}
}
