package scripted_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestHandler_StatusFault(t *testing.T) {
	h, base := serve(t, "steps:\n  - content: ok\n    fault: {status: 429, retry_after: 3, times: 2, message: slow down}\n")
	for i := 0; i < 2; i++ {
		resp, body := post(t, base, userReq(false))
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" || !strings.Contains(string(body), "slow down") {
			t.Fatalf("attempt %d: status %d retry-after %q body %s", i, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	if resp, _ := post(t, base, userReq(false)); resp.StatusCode != 200 {
		t.Fatalf("third request: status %d", resp.StatusCode)
	}
	var outcomes []string
	for _, r := range h.Requests() {
		outcomes = append(outcomes, r.Outcome)
	}
	if got := strings.Join(outcomes, ","); got != "fault:429,fault:429,reply" {
		t.Errorf("outcomes = %s", got)
	}
}

func TestHandler_CutStreamDropsTheConnection(t *testing.T) {
	_, base := serve(t, "steps:\n  - content: a reply long enough to cut\n    fault: {kind: cut_stream}\n")
	for _, stream := range []bool{true, false} {
		data, _ := json.Marshal(userReq(stream))
		resp, err := http.Post(base+"/chat/completions", "application/json", bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if stream {
			if err == nil {
				t.Errorf("stream: body read without error: %s", body)
			}
			if strings.Contains(string(body), "[DONE]") {
				t.Errorf("stream: cut stream still has [DONE]")
			}
			continue
		}
		// The second request gets the real (streamed=false) reply.
		if err != nil || !strings.Contains(string(body), "a reply long enough") {
			t.Errorf("after the fault: %v %s", err, body)
		}
	}
}
