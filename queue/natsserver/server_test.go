package natsserver_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/wrenchworks/wrench/queue/natsserver"
)

func TestStartRejectsBadConfig(t *testing.T) {
	for _, cfg := range []natsserver.Config{
		{},
		{DataDir: t.TempDir(), Listen: "nonsense"},
		{DataDir: t.TempDir(), Listen: "127.0.0.1:http"},
	} {
		if e, err := natsserver.Start(context.Background(), cfg); err == nil {
			e.Shutdown()
			t.Errorf("StartEmbedded(%+v) succeeded", cfg)
		}
	}
}

func TestMonitorEndpoint(t *testing.T) {
	e, err := natsserver.Start(context.Background(), natsserver.Config{DataDir: t.TempDir(), MonitorListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	resp, err := http.Get("http://" + e.MonitorAddr() + "/jsz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/jsz: %s", resp.Status)
	}
	plain, err := natsserver.Start(context.Background(), natsserver.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Shutdown()
	if plain.MonitorAddr() != "" {
		t.Fatal("monitor endpoint without MonitorListen")
	}
}
