// Package natstest starts real NATS servers for tests: the in-process
// JetStream server that `wrench serve` embeds, with a queue connection and
// a raw JetStream handle for inspecting what the queue stored.
package natstest

import (
	"context"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/queue/natsserver"
)

// Start runs a JetStream server for the test, on a temporary data dir when
// cfg.DataDir is empty, and shuts it down when the test ends.
func Start(t testing.TB, cfg natsserver.Config) *natsserver.Server {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	s, err := natsserver.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// Connect opens a queue connection to s (in-process), with mod applied to
// its Config, and closes it when the test ends.
func Connect(t testing.TB, s *natsserver.Server, mod ...func(*queue.Config)) *queue.Conn {
	t.Helper()
	cfg := queue.Config{ConnectOptions: []nats.Option{s.ConnectOption()}}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := queue.Connect(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// handles caches one raw connection per test and server.
var handles sync.Map // handleKey -> jetstream.JetStream

type handleKey struct {
	t   testing.TB
	url string
	s   *natsserver.Server
}

// JetStream returns a raw JetStream handle on s, for tests that look at or
// tamper with streams behind the queue's back. Calls in one test share a
// connection.
func JetStream(t testing.TB, s *natsserver.Server) jetstream.JetStream {
	t.Helper()
	return handle(t, handleKey{t: t, s: s}, func() (*nats.Conn, error) { return nats.Connect("", s.ConnectOption()) })
}

// Dial returns a raw JetStream handle on the server at url, like
// [JetStream], connecting with opts (credentials).
func Dial(t testing.TB, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	return handle(t, handleKey{t: t, url: url}, func() (*nats.Conn, error) { return nats.Connect(url, opts...) })
}

func handle(t testing.TB, k handleKey, dial func() (*nats.Conn, error)) jetstream.JetStream {
	t.Helper()
	if js, ok := handles.Load(k); ok {
		return js.(jetstream.JetStream)
	}
	nc, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	if prev, loaded := handles.LoadOrStore(k, js); loaded {
		nc.Close()
		return prev.(jetstream.JetStream)
	}
	t.Cleanup(func() {
		handles.Delete(k)
		nc.Close()
	})
	return js
}

// Stream returns stream name of s.
func Stream(t testing.TB, s *natsserver.Server, name string) jetstream.Stream {
	t.Helper()
	st, err := JetStream(t, s).Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// StreamMsgs is how many messages stream name of s holds.
func StreamMsgs(t testing.TB, s *natsserver.Server, name string) uint64 {
	t.Helper()
	return Msgs(t, JetStream(t, s), name)
}

// Msgs is how many messages stream name holds.
func Msgs(t testing.TB, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	st, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
