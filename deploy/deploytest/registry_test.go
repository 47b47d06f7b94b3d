package deploytest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// testRegistry is a minimal Docker registry (the v2 API's pull side) that
// serves one image and requires basic authentication, so tests can check
// that credentials reach `docker pull`. Docker treats 127.0.0.0/8 as an
// insecure registry, so plain HTTP works.
type testRegistry struct {
	// Host is host:port, the registry part of the image's reference.
	Host string
	// Image is the full reference of the one image served.
	Image          string
	user, password string
}

// newTestRegistry serves a one-layer image (a file /hello) at
// HOST/<repo>:<tag> for user:password on 127.0.0.1.
func newTestRegistry(t *testing.T, repo, tag, user, password string) *testRegistry {
	t.Helper()
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	must(t, tw.WriteHeader(&tar.Header{Name: "hello", Mode: 0o644, Size: 6}))
	tw.Write([]byte("hello\n"))
	must(t, tw.Close())
	diffID := digest(layer.Bytes())
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(layer.Bytes())
	must(t, zw.Close())
	config, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux", "config": map[string]any{},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	blobs := map[string][]byte{digest(config): config, digest(gz.Bytes()): gz.Bytes()}
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.docker.distribution.manifest.v2+json",
		"config": map[string]any{"mediaType": "application/vnd.docker.container.image.v1+json",
			"size": len(config), "digest": digest(config)},
		"layers": []map[string]any{{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
			"size": gz.Len(), "digest": digest(gz.Bytes())}},
	})
	r := &testRegistry{user: user, password: password}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="deploytest"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED"}]}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		p := req.URL.Path
		switch {
		case p == "/v2/":
			w.Write([]byte("{}"))
		case p == "/v2/"+repo+"/manifests/"+tag || p == "/v2/"+repo+"/manifests/"+digest(manifest):
			w.Header().Set("Content-Type", "application/vnd.docker.distribution.manifest.v2+json")
			w.Header().Set("Docker-Content-Digest", digest(manifest))
			w.Header().Set("Content-Length", fmt.Sprint(len(manifest)))
			if req.Method != http.MethodHead {
				w.Write(manifest)
			}
		case strings.HasPrefix(p, "/v2/"+repo+"/blobs/"):
			b, ok := blobs[strings.TrimPrefix(p, "/v2/"+repo+"/blobs/")]
			if !ok {
				http.NotFound(w, req)
				return
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", fmt.Sprint(len(b)))
			if req.Method != http.MethodHead {
				w.Write(b)
			}
		default:
			http.NotFound(w, req)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: h}}
	srv.Start()
	t.Cleanup(srv.Close)
	r.Host = ln.Addr().String()
	r.Image = r.Host + "/" + repo + ":" + tag
	return r
}

// DockerConfig is a config.json (as in a kubernetes.io/dockerconfigjson
// Secret) with the given credentials for this registry.
func (r *testRegistry) DockerConfig(user, password string) []byte {
	b, _ := json.Marshal(map[string]any{"auths": map[string]any{r.Host: map[string]string{
		"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password)),
	}}})
	return b
}

func digest(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }
