package main

import (
	"flag"
	"io"
	"testing"

	"github.com/wrenchworks/wrench/queue"
)

func TestByteSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1048576", 1 << 20, true},
		{"64KiB", 64 << 10, true},
		{"512 MiB", 512 << 20, true},
		{"8GiB", 8 << 30, true},
		{"2TiB", 2 << 40, true},
		{"-1", -1, true},
		{"10B", 10, true},
		{"1GB", 0, false},
		{"lots", 0, false},
		{"99999999TiB", 0, false},
	} {
		var b byteSize
		err := b.Set(c.in)
		if (err == nil) != c.ok || (c.ok && int64(b) != c.want) {
			t.Errorf("Set(%q) = %d, %v; want %d (ok %v)", c.in, b, err, c.want, c.ok)
		}
	}
	if s := byteSize(8 << 30); s.String() != "8GiB" {
		t.Errorf("String = %q", s.String())
	}
}

// The storage flags reach the queue configuration, with the documented
// defaults when not given.
func TestLayoutFlags(t *testing.T) {
	parse := func(args ...string) (layoutFlags, error) {
		var l layoutFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		l.register(fs)
		if err := fs.Parse(args); err != nil {
			return l, err
		}
		return l, l.check()
	}
	l, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	cfg := l.config(nil, true)
	want := queue.Retention{StateMaxAge: queue.DefaultStateMaxAge, StateMaxBytes: queue.DefaultStateMaxBytes,
		ArtifactsMaxAge: queue.DefaultArtifactsMaxAge, ArtifactsMaxBytes: queue.DefaultArtifactsMaxBytes}
	if cfg.Replicas != 1 || cfg.Retention != want || !cfg.ApplyLayout {
		t.Fatalf("defaults: %+v", cfg)
	}
	l, err = parse("--replicas", "3", "--state-max-age", "24h", "--artifacts-max-bytes", "2GiB", "--state-max-bytes", "-1")
	if err != nil {
		t.Fatal(err)
	}
	cfg = l.config(nil, false)
	if cfg.Replicas != 3 || cfg.Retention.StateMaxAge.Hours() != 24 || cfg.Retention.ArtifactsMaxBytes != 2<<30 ||
		cfg.Retention.StateMaxBytes != -1 || cfg.ApplyLayout {
		t.Fatalf("set: %+v", cfg)
	}
	if _, err := parse("--replicas", "0"); err == nil {
		t.Error("--replicas 0 accepted")
	}
}
