package docker

import (
	"strings"
	"testing"
)

// A Go runtime abort prints its cause first and then pages of goroutine
// stacks: the buffer keeps the start as well as the end.
func TestTailBufferKeepsHeadAndTail(t *testing.T) {
	tests := []struct {
		name      string
		writes    []string
		want      string
		wantFirst string
	}{
		{"fits", []string{"fatal error: x\n", "more\n"}, "fatal error: x\nmore\n", "fatal error: x"},
		{"leading blank lines", []string{"\n\n  oops  \nrest"}, "\n\n  oops  \nrest", "oops"},
		{"overflow", []string{"runtime: failed\n", strings.Repeat("s", 100), "END"}, "runtime: failed\n\n…\nsssssssEND", "runtime: failed"},
		{"overflow in one write", []string{"abcdefghijklmnop" + strings.Repeat("x", 50) + "0123456789"}, "abcdefghijklmnop\n…\n0123456789", "abcdefghijklmnop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &tailBuffer{headMax: 16, max: 10}
			for _, w := range tt.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if got := b.String(); got != tt.want {
				t.Errorf("String = %q, want %q", got, tt.want)
			}
			if got := b.FirstLine(); got != tt.wantFirst {
				t.Errorf("FirstLine = %q, want %q", got, tt.wantFirst)
			}
		})
	}
}
