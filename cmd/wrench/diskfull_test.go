package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/internal/disktest"
	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
)

// TestServeReadyzFollowsTheStoreDisk runs `wrench serve` (API only) with
// its data dir on a small tmpfs and fills it: /readyz answers 503 naming
// the store while the disk is full and after an artifact write failed on
// it; once the space is back it answers 200 again by itself (the embedded
// server restarts JetStream), the artifact store takes the same write,
// and the API takes a task.
func TestServeReadyzFollowsTheStoreDisk(t *testing.T) {
	dir := disktest.Mount(t, "160m")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv, apiURL, natsURL, natsSeed := startServeProc(t, ctx, "--slots", "0", "--data-dir", dir, "--min-free-disk", "4MiB",
		"--state-max-bytes", "8MiB", "--artifacts-max-bytes", "32MiB")
	readyz := func() (int, string) {
		resp, err := http.Get(apiURL + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitReadyz := func(what string, ok func(code int, body string) bool) string {
		t.Helper()
		for {
			code, body := readyz()
			if ok(code, body) {
				return body
			}
			select {
			case <-ctx.Done():
				t.Fatalf("/readyz never %s: last %d %s", what, code, body)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	waitReadyz("ready", func(code int, _ string) bool { return code == http.StatusOK })

	signIn, err := nats.NkeyOptionFromSeed(natsSeed)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := natstest.Dial(t, natsURL, signIn).ObjectStore(ctx, queue.ArtifactsBucket)
	if err != nil {
		t.Fatal(err)
	}
	put := func() error {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		defer pcancel()
		_, err := obj.Put(pctx, jetstream.ObjectMeta{Name: "t-disk/patch.diff"}, bytes.NewReader(make([]byte, 1<<20)))
		return err
	}

	free := disktest.Fill(t, dir)
	if err := put(); err == nil {
		t.Fatal("an artifact was stored on a full disk")
	}
	body := waitReadyz("unready", func(code int, _ string) bool { return code == http.StatusServiceUnavailable })
	if !strings.Contains(body, "NATS store") {
		t.Errorf("/readyz on a full disk does not name the store: %s", body)
	}

	free()
	waitReadyz("ready again", func(code int, _ string) bool { return code == http.StatusOK })
	if err := put(); err != nil {
		t.Fatalf("the artifact store takes no writes after the disk has room: %v", err)
	}
	repo, script := helloRepo(t, 0)
	if _, _, err := api.NewClient(apiURL, "").Submit(ctx, helloTask("t-after-full", repo, script)); err != nil {
		t.Fatalf("submit after recovery: %v", err)
	}
	if !strings.Contains(srv.out.String(), "JetStream restarted") {
		t.Errorf("serve did not log the JetStream restart:\n%s", tail(srv.out.String(), 4096))
	}
}
