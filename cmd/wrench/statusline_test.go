package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncWriter is a bytes.Buffer safe for the status line's ticker.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// mmdebstrapOutput is what an image build writes, in the order it does.
const mmdebstrapOutput = `time=2026-01-01T00:00:00Z level=INFO msg="building sandbox image" tag=t suite=bookworm mirror=http://deb.debian.org/debian
I: chroot architecture amd64 is equal to the host's architecture
I: automatically chosen mode: root
I: downloading packages with apt...
Get:1 http://deb.debian.org/debian bookworm/main amd64 base-files 12.4 [70.8 kB]
Get:2 http://deb.debian.org/debian bookworm/main amd64 bash 5.2 [1489 kB]
W: Download is performed unsandboxed as root
I: extracting archives...
I: installing essential packages...
I: installing remaining packages inside the chroot...
Setting up python3 (3.11.2-1+b1) ...
I: running --customize-hook in shell: sh -c 'sh /tmp/customize.sh "$1"' exec /tmp/mmdebstrap.x
I: cleaning package lists and apt cache...
time=2026-01-01T00:01:10Z level=INFO msg="built sandbox image" tag=t id=8c8672375561
`

// TestImageBuildProgress: without --verbose, an image build shows its steps
// — plain lines off a terminal, one line redrawn on a terminal — keeps
// warnings, and drops apt's chatter.
func TestImageBuildProgress(t *testing.T) {
	var plain bytes.Buffer
	sl := newStatusLine(&plain, false, "image t")
	lw := newLineWriter(func(line string) { imageLine(sl, line) })
	for _, chunk := range strings.SplitAfter(mmdebstrapOutput, "a") { // lines arrive in pieces
		lw.Write([]byte(chunk))
	}
	sl.Close()
	out := plain.String()
	for _, want := range []string{
		"image t: building sandbox image (0s)\n",
		"image t: downloading packages with apt (0s)\n",
		"W: Download is performed unsandboxed as root\n",
		"image t: installing remaining packages inside the chroot (0s)\n",
		"image t: built sandbox image (0s)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plain output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Get:1") || strings.Contains(out, "Setting up") || strings.Contains(out, "\r") {
		t.Errorf("plain output has apt's chatter or redraws:\n%s", out)
	}

	var live syncWriter
	sl = newStatusLine(&live, true, "image t")
	lw = newLineWriter(func(line string) { imageLine(sl, line) })
	lw.Write([]byte("I: downloading packages with apt...\n"))
	time.Sleep(1100 * time.Millisecond) // one redraw with the elapsed time
	lw.Write([]byte("W: careful\nI: extracting archives...\n"))
	sl.Close()
	out = live.String()
	for _, want := range []string{
		"\r\x1b[Kimage t: downloading packages with apt (0s)",
		"\r\x1b[Kimage t: downloading packages with apt (1s)",
		"\r\x1b[KW: careful\n",
		"\r\x1b[Kimage t: extracting archives (1s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("live output lacks %q:\n%q", want, out)
		}
	}
	if !strings.HasSuffix(out, "\r\x1b[K") {
		t.Errorf("the live line is not cleared at the end: %q", out)
	}
}
