package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/github/githubtest"
	"github.com/wrenchworks/wrench/llm"
	"github.com/wrenchworks/wrench/llm/scripted"
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
	t.Run("data dir the engine sees", func(t *testing.T) {
		requireImage(t)
		data := t.TempDir()
		stdout, _, code := runWrench(t, context.Background(), nil, "doctor", "--data-dir", data)
		if strings.Contains(stdout, "mounts") {
			t.Errorf("doctor reports the data dir this engine shares:\n%s", stdout)
		}
		if code != exitOK && !strings.Contains(stdout, "PROBLEM") {
			t.Errorf("exit %d without a problem:\n%s", code, stdout)
		}
		if probes, _ := filepath.Glob(filepath.Join(data, ".wrench-probe-*")); len(probes) > 0 {
			t.Errorf("probes left behind: %v", probes)
		}
	})
	t.Run("bad flag", func(t *testing.T) {
		if _, _, code := runWrench(t, context.Background(), nil, "doctor", "extra"); code != exitBadInput {
			t.Errorf("exit %d, want %d", code, exitBadInput)
		}
	})
}

// TestDoctorGitHubApp: with an App configured, doctor authenticates as it
// and names the permission an installation lacks (exit non-zero even with
// no Docker engine to check), and reports the App when all is well.
func TestDoctorGitHubApp(t *testing.T) {
	gh := githubtest.New(t, "unused")
	app := gh.EnableApp(t, 31, nil)
	perms := githubtest.FullPermissions()
	perms["pull_requests"] = "read"
	gh.Install("acme", perms)
	dir := t.TempDir()
	key, ca := filepath.Join(dir, "app.pem"), filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(key, app.PrivateKeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, gh.CA(), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"DOCKER_HOST=unix:///nonexistent/docker.sock", "WRENCH_GITHUB_APP_ID=31", "WRENCH_GITHUB_APP_KEY_FILE=" + key}
	stdout, stderr, code := runWrench(t, context.Background(), env, "doctor", "--github-api", gh.APIURL(), "--github-ca", ca)
	if code != exitInfra {
		t.Errorf("exit %d, want %d", code, exitInfra)
	}
	for _, want := range []string{`PROBLEM github: the installation on acme lacks write permission "pull_requests" (has read)`,
		`"Pull requests": "Read and write"`, "github: App wrench-test (id 31), installed on acme (missing pull_requests: write)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s%s", want, stdout, stderr)
		}
	}

	gh2 := githubtest.New(t, "unused")
	app2 := gh2.EnableApp(t, 32, nil)
	gh2.Install("acme", nil)
	if err := os.WriteFile(key, app2.PrivateKeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, gh2.CA(), 0o644); err != nil {
		t.Fatal(err)
	}
	env[1] = "WRENCH_GITHUB_APP_ID=32"
	stdout, _, _ = runWrench(t, context.Background(), env, "doctor", "--github-api", gh2.APIURL(), "--github-ca", ca)
	if strings.Contains(stdout, "PROBLEM github") || !strings.Contains(stdout, "github: App wrench-test (id 32), installed on acme\n") {
		t.Errorf("a complete App is reported with problems:\n%s", stdout)
	}
}

// TestDoctorChecksTheModel: doctor asks the model endpoint with the key,
// says which variable the key came from (never the key), and makes a
// refused key or an unreachable endpoint a problem.
func TestDoctorChecksTheModel(t *testing.T) {
	srv, err := scripted.Start(context.Background(), &scripted.Script{Model: "my-model"}, "", scripted.WithAPIKey("sk-doctor-key-1234"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	noEngine := "DOCKER_HOST=unix:///nonexistent/docker.sock"
	stdout, _, _ := runWrench(t, context.Background(), []string{noEngine, "WRENCH_LLM_BASE_URL=" + srv.URL(),
		"WRENCH_LLM_API_KEY=sk-doctor-key-1234", "WRENCH_LLM_MODEL=my-model"}, "doctor")
	if !strings.Contains(stdout, "model: my-model at "+srv.URL()+" (key from WRENCH_LLM_API_KEY): the model is offered") ||
		strings.Contains(stdout, "PROBLEM model") {
		t.Errorf("good key:\n%s", stdout)
	}
	stdout, _, code := runWrench(t, context.Background(), []string{noEngine, "WRENCH_LLM_BASE_URL=" + srv.URL(),
		"WRENCH_LLM_API_KEY=sk-stale-key-5678"}, "doctor", "--model", "my-model")
	if code != exitInfra || !strings.Contains(stdout, "PROBLEM model: "+srv.URL()+" answered HTTP 401: the key from WRENCH_LLM_API_KEY was refused") ||
		strings.Contains(stdout, "sk-stale-key") {
		t.Errorf("refused key: exit %d\n%s", code, stdout)
	}
	stdout, _, _ = runWrench(t, context.Background(), []string{noEngine, "WRENCH_LLM_API_KEY=", "OPENAI_API_KEY="}, "doctor")
	if !strings.Contains(stdout, "PROBLEM model: no API key for https://api.openai.com/v1") {
		t.Errorf("no key:\n%s", stdout)
	}
	stdout, _, _ = runWrench(t, context.Background(), []string{noEngine}, "doctor", "--model", "none")
	if strings.Contains(stdout, "model") {
		t.Errorf("--model none still checks:\n%s", stdout)
	}
}

// TestServeWarnsWithoutModelKey: serve, which runs tasks, says at start
// that the default model has no key.
func TestServeWarnsWithoutModelKey(t *testing.T) {
	srv := startServe(t, t.TempDir(), "", fakeRunner(nil))
	if out := srv.stderr.String(); !strings.Contains(out, "wrench serve: warning: no model key: WRENCH_LLM_API_KEY and OPENAI_API_KEY are unset") {
		t.Errorf("no warning at start:\n%s", out)
	}
	for _, env := range []map[string]string{
		{"WRENCH_LLM_API_KEY": "sk-x"}, {"OPENAI_API_KEY": "sk-x"}, {"WRENCH_LLM_BASE_URL": "http://127.0.0.1:11434/v1"},
	} {
		if w := llm.KeyWarning(func(k string) string { return env[k] }); w != "" {
			t.Errorf("%v: warns %q", env, w)
		}
	}
}
