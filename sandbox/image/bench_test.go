package image

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker"
	"github.com/wrenchworks/wrench/sandbox/docker/dockertest"
)

var denv dockertest.Env

func TestMain(m *testing.M) {
	code := m.Run()
	denv.Cleanup()
	os.Exit(code)
}

// BenchmarkFirstGoTest times the first `go test ./...` of a small module
// in a fresh sandbox of the default image, with the
// image's pre-built build cache (the default) and with an empty one
// (WRENCH_GOCACHE_SEED=""); the net_http cases test a module whose test
// imports net/http/httptest. Only the go test is timed; each iteration
// gets a new sandbox. It reports the median in seconds as s/median.
//
//	go test ./sandbox/image -run '^$' -bench FirstGoTest -benchtime 5x
func BenchmarkFirstGoTest(b *testing.B) {
	cli, shim, _ := denv.Setup(b)
	st, err := Inspect(context.Background(), docker.NewEngine(cli), DefaultTag)
	if err != nil || !st.Present {
		b.Skipf("image %s missing; run `wrench image build`", DefaultTag)
	}
	deployment := dockertest.Deployment(b)
	p, err := docker.New(context.Background(), docker.Config{
		Engine: docker.NewEngine(cli), ShimPath: shim, DefaultImage: DefaultTag, Deployment: deployment,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dockertest.RemoveAll(b, cli, deployment); p.Close() })
	for _, bc := range []struct {
		name   string
		env    map[string]string
		module map[string][]byte
	}{
		{"empty_cache", map[string]string{"WRENCH_GOCACHE_SEED": ""}, moduleFiles()},
		{"prebuilt_cache", nil, moduleFiles()},
		{"empty_cache/net_http", map[string]string{"WRENCH_GOCACHE_SEED": ""}, httpModuleFiles()},
		{"prebuilt_cache/net_http", nil, httpModuleFiles()},
	} {
		module := bc.module
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			var times []time.Duration
			b.StopTimer()
			for range b.N {
				ws := b.TempDir()
				for name, data := range module {
					if err := os.WriteFile(filepath.Join(ws, name), data, 0o644); err != nil {
						b.Fatal(err)
					}
				}
				sb, err := p.Start(ctx, sandbox.Spec{TaskID: "bench-gocache", WorkspaceDir: ws, Env: bc.env})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "go test ./...", Timeout: 5 * time.Minute})
				b.StopTimer()
				sb.Close(ctx)
				if err != nil || res.ExitCode != 0 || !strings.Contains(string(res.Output), "ok ") {
					b.Fatalf("go test: exit %d, %v: %s", res.ExitCode, err, res.Output)
				}
				times = append(times, res.Duration)
			}
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			b.ReportMetric(times[len(times)/2].Seconds(), "s/median")
		})
	}
}

// moduleFiles is a small module like examples/go-calc (whose tests fail
// on purpose): one package, its tests, standard library only.
func moduleFiles() map[string][]byte {
	return map[string][]byte{
		"go.mod":  []byte("module example.com/calc\n\ngo 1.19\n"),
		"calc.go": []byte("package calc\n\nimport \"strings\"\n\nfunc Add(a, b int) int { return a + b }\n\nfunc Shout(s string) string { return strings.ToUpper(s) }\n"),
		"calc_test.go": []byte("package calc\n\nimport (\n\t\"fmt\"\n\t\"testing\"\n)\n\n" +
			"func TestAdd(t *testing.T) {\n\tif got := fmt.Sprint(Add(1, 2)); got != \"3\" {\n\t\tt.Fatal(got)\n\t}\n}\n\n" +
			"func TestShout(t *testing.T) {\n\tif Shout(\"a\") != \"A\" {\n\t\tt.Fatal(\"Shout\")\n\t}\n}\n"),
	}
}

// httpModuleFiles is a small module whose test starts an HTTP server.
func httpModuleFiles() map[string][]byte {
	return map[string][]byte{
		"go.mod":   []byte("module example.com/hello\n\ngo 1.19\n"),
		"hello.go": []byte("package hello\n\nimport (\n\t\"encoding/json\"\n\t\"net/http\"\n)\n\nfunc Handler(w http.ResponseWriter, r *http.Request) {\n\tjson.NewEncoder(w).Encode(map[string]string{\"hello\": r.URL.Path})\n}\n"),
		"hello_test.go": []byte("package hello\n\nimport (\n\t\"io\"\n\t\"net/http\"\n\t\"net/http/httptest\"\n\t\"testing\"\n)\n\n" +
			"func TestHandler(t *testing.T) {\n\tsrv := httptest.NewServer(http.HandlerFunc(Handler))\n\tdefer srv.Close()\n" +
			"\tresp, err := http.Get(srv.URL + \"/x\")\n\tif err != nil {\n\t\tt.Fatal(err)\n\t}\n\tdefer resp.Body.Close()\n" +
			"\tb, _ := io.ReadAll(resp.Body)\n\tif string(b) != \"{\\\"hello\\\":\\\"/x\\\"}\\n\" {\n\t\tt.Fatalf(\"%q\", b)\n\t}\n}\n"),
	}
}
