package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// A stranger who reaches serve's NATS listener can neither publish a task
// nor read events: the hostile review ran a task with one raw TCP publish,
// past the API token and the GitHub-source check. The worker's seed file,
// which serve writes under its data dir, signs in.
func TestHostileClient_RawNATSPublishRunsNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, apiURL, natsURL, seed := startServeProc(t, ctx, "--slots", "0", "--data-dir", t.TempDir())
	defer srv.kill()

	_, err := nats.Connect(natsURL, nats.Timeout(5*time.Second), nats.NoReconnect())
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("an unauthenticated client connected (err %v)", err)
	}

	signIn, err := nats.NkeyOptionFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(natsURL, signIn, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("the worker's seed does not sign in: %v", err)
	}
	defer nc.Close()
	// The seed is a worker's full credential: it may queue work, which is
	// why it is a file readable by serve's user only.
	data, _ := json.Marshal(task.Task{ID: "t-signed", Repo: task.Repo{URL: "/r"}, Instruction: "x"})
	if err := nc.Publish(queue.TaskSubjectPrefix+"t-signed", data); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := api.NewClient(apiURL, "").Status(ctx, "t-signed"); err != nil {
		t.Errorf("a signed-in publish did not queue: %v", err)
	}
}

// serve's embedded NATS: users always when it listens, TLS beyond
// loopback (a certificate made under the data dir), nothing in-process only.
func TestEmbeddedNATSConfig(t *testing.T) {
	for _, tc := range []struct {
		listen    string
		wantUsers bool
		wantTLS   bool
	}{
		{listen: ""},
		{listen: "127.0.0.1:0", wantUsers: true},
		{listen: "0.0.0.0:4222", wantUsers: true, wantTLS: true},
	} {
		dir := t.TempDir()
		f := serveFlags{natsListen: tc.listen}
		cfg, signIn, err := f.embeddedNATS(dir)
		if err != nil {
			t.Fatal(err)
		}
		if (len(cfg.NKeys) > 0) != tc.wantUsers || (cfg.TLS != nil) != tc.wantTLS {
			t.Errorf("%q: users %v tls %v", tc.listen, cfg.NKeys, cfg.TLS != nil)
		}
		if tc.wantUsers && !strings.Contains(signIn, "--nats-nkey "+dir) {
			t.Errorf("%q: sign in with %q", tc.listen, signIn)
		}
		if strings.Contains(signIn, "--nats-ca") != tc.wantTLS {
			t.Errorf("%q: sign in with %q", tc.listen, signIn)
		}
	}
}
