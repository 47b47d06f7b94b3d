package main

import (
	"strings"
	"testing"
)

func TestShimEgressFlagsGoTogether(t *testing.T) {
	for _, args := range [][]string{
		{"__shim", "-egress-socket", "/.wrench/run/egress.sock"},
		{"__shim", "-egress-listen", "127.0.0.1:3128"},
	} {
		_, stderr, code := runDispatch(noEnv, args...)
		if code != exitBadInput || !strings.Contains(stderr, "-egress-socket and -egress-listen go together") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}
