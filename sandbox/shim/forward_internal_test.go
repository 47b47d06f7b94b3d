package shim

import (
	"slices"
	"testing"
)

func TestWithProxyEnv(t *testing.T) {
	got := withProxyEnv([]string{"PATH=/bin", "HTTP_PROXY=http://elsewhere:8080", "no_proxy=*"}, "127.0.0.1:3128")
	want := []string{"HTTPS_PROXY=http://127.0.0.1:3128", "HTTP_PROXY=http://127.0.0.1:3128", "NO_PROXY=localhost,127.0.0.1",
		"PATH=/bin", "http_proxy=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128", "no_proxy=localhost,127.0.0.1"}
	if !slices.Equal(got, want) {
		t.Errorf("withProxyEnv = %q\nwant %q", got, want)
	}
}
