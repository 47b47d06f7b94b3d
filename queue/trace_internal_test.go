package queue

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// TestHeaderCarrier: keys are written as the propagator names them and read
// case-insensitively (NATS headers are case-sensitive; a gateway may have
// canonicalised them).
func TestHeaderCarrier(t *testing.T) {
	h := nats.Header{}
	headerCarrier(h).Set("traceparent", "00-abc-def-01")
	if got := h["traceparent"]; len(got) != 1 || got[0] != "00-abc-def-01" {
		t.Fatalf("header after Set = %v", h)
	}
	canon := headerCarrier(nats.Header{"Traceparent": {"v"}})
	if canon.Get("traceparent") != "v" || canon.Get("TRACEPARENT") != "v" {
		t.Error("lookup is not case-insensitive")
	}
	if canon.Get("tracestate") != "" || len(canon.Keys()) != 1 {
		t.Errorf("keys = %v", canon.Keys())
	}
}
