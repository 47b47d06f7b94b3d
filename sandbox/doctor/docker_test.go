package doctor

import (
	"context"
	"github.com/wrenchworks/wrench/sandbox/docker/dockertest"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/sandbox/image"
)

// TestCheckRealEngine runs Check against the engine named by the
// environment; it skips without one, except under CI=true.
func TestCheckRealEngine(t *testing.T) {
	cli := dockertest.Engine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	r := Check(ctx, cli, Options{Image: "wrench-doctor-test:absent", Runtime: "no-such-runtime"})
	if !r.Reachable || r.EngineVersion == "" || r.APIVersion == "" || r.NegotiatedAPIVersion == "" {
		t.Fatalf("engine facts missing: %+v", r)
	}
	if versionLess(r.APIVersion, r.NegotiatedAPIVersion) {
		t.Errorf("client speaks %s, newer than the engine's %s", r.NegotiatedAPIVersion, r.APIVersion)
	}
	if len(r.Runtimes) == 0 {
		t.Errorf("no runtimes reported")
	}
	var text []string
	for _, p := range r.Problems {
		text = append(text, p.Message)
	}
	all := strings.Join(text, "\n")
	for _, want := range []string{`runtime "no-such-runtime" is not installed`, "wrench-doctor-test:absent not found"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
	t.Logf("engine %s API %s (negotiated %s), cgroup v%s, memory %v pids %v swap %v, runtimes %v, rootless %v",
		r.EngineVersion, r.APIVersion, r.NegotiatedAPIVersion, r.CgroupVersion, r.MemoryLimit, r.PidsLimit, r.SwapLimit, r.Runtimes, r.Rootless)

	def := Check(ctx, cli, Options{})
	present, err := image.Exists(ctx, image.DefaultTag)
	if err != nil {
		t.Fatal(err)
	}
	if def.Image.Present != present {
		t.Errorf("default image present = %v, image.Exists = %v", def.Image.Present, present)
	}
}
