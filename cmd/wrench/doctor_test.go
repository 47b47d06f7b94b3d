package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestDoctorUnreachableEngine(t *testing.T) {
	stdout, _, code := runWrench(t, context.Background(), []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}, "doctor")
	if code != exitInfra {
		t.Errorf("exit %d, want %d", code, exitInfra)
	}
	if !strings.Contains(stdout, "docker engine unreachable") || !strings.Contains(stdout, "fix: start the Docker engine") {
		t.Errorf("output does not name the problem and its fix:\n%s", stdout)
	}
}

func TestDoctorRealEngine(t *testing.T) {
	requireDocker(t)
	t.Run("missing image and runtime", func(t *testing.T) {
		stdout, _, code := runWrench(t, context.Background(), nil, "doctor", "--image", "wrench-doctor-test:absent", "--runtime", "runsc-absent")
		if code != exitInfra {
			t.Errorf("exit %d, want %d", code, exitInfra)
		}
		for _, want := range []string{"PROBLEM image: sandbox image wrench-doctor-test:absent not found", `PROBLEM runtime: runtime "runsc-absent" is not installed`} {
			if !strings.Contains(stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, stdout)
			}
		}
	})
	t.Run("json", func(t *testing.T) {
		stdout, _, _ := runWrench(t, context.Background(), nil, "doctor", "--json")
		var r struct {
			Reachable  bool   `json:"reachable"`
			APIVersion string `json:"api_version"`
			Problems   []any  `json:"problems"`
		}
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("--json output is not JSON: %v\n%s", err, stdout)
		}
		if !r.Reachable || r.APIVersion == "" || r.Problems == nil {
			t.Errorf("report = %+v", r)
		}
	})
	t.Run("bad flag", func(t *testing.T) {
		if _, _, code := runWrench(t, context.Background(), nil, "doctor", "extra"); code != exitBadInput {
			t.Errorf("exit %d, want %d", code, exitBadInput)
		}
	})
}
