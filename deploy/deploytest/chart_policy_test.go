package deploytest

import (
	"slices"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/policy"
)

// TestChartPolicyReachesServeAndWorker: wrench.policy becomes a ConfigMap
// that the API and the worker pods both mount and pass as --policy (so
// admission and execution follow one policy), that the real policy parser
// accepts, and whose checksum rolls the pods when it changes.
func TestChartPolicyReachesServeAndWorker(t *testing.T) {
	c := loadChart(t, chartDir(t))
	sc := scenarios[3] // scaled with KEDA, which sets wrench.policy
	if !strings.Contains(sc.values, "policy:") {
		t.Fatalf("scenario %q sets no policy", sc.name)
	}
	ms := renderScenario(t, c, sc.values)
	var text string
	for _, m := range ms {
		if m.kind() == "ConfigMap" && m.name() == "wrench-policy" {
			text = str(m.obj, "data", "policy.yaml")
		}
	}
	if text == "" {
		t.Fatal("no policy.yaml in ConfigMap wrench-policy")
	}
	p, err := policy.Parse([]byte(text), policy.Options{})
	if err != nil {
		t.Fatalf("the rendered policy does not parse: %v\n%s", err, text)
	}
	if !slices.Equal(p.Defaults.Models, []string{"gpt-4.1"}) {
		t.Errorf("rendered policy models %v", p.Defaults.Models)
	}
	for _, name := range []string{"Deployment/wrench-api", "Deployment/wrench-worker"} {
		pod := pods(ms)[name]
		w := containerByName(pod, "wrench")
		if !slices.Contains(list(w, "args"), any("--policy=/etc/wrench/policy/policy.yaml")) {
			t.Errorf("%s: args %v lack --policy", name, w["args"])
		}
		if !mounts(pod, w, "policy", "/etc/wrench/policy", "configMap", "wrench-policy") {
			t.Errorf("%s: ConfigMap wrench-policy not mounted at /etc/wrench/policy", name)
		}
	}
	sum := func(values string) string {
		for _, m := range renderScenario(t, c, values) {
			if m.name() == "wrench-worker" && m.kind() == "Deployment" {
				return str(m.obj, "spec", "template", "metadata", "annotations", "checksum/policy")
			}
		}
		return ""
	}
	a, b := sum(sc.values), sum(strings.Replace(sc.values, "max_turns: 40", "max_turns: 41", 1))
	if a == "" || a == b {
		t.Errorf("checksum/policy %q then %q: a policy change must roll the pods", a, b)
	}
	// Without a policy: no ConfigMap, no flag (the built-in policy).
	for _, m := range renderScenario(t, c, scenarios[0].values) {
		if m.name() == "wrench-policy" {
			t.Error("a ConfigMap wrench-policy without wrench.policy")
		}
	}
}

// TestChartWorkersSignInWithNkey: nats.nkeySecret gives scaled workers the
// nkey seed (and CA) that `wrench serve --nats-listen` hands its workers.
func TestChartWorkersSignInWithNkey(t *testing.T) {
	c := loadChart(t, chartDir(t))
	sc := scenarios[4] // workers only, joining another release's NATS
	if !strings.Contains(sc.values, "nkeySecret") {
		t.Fatalf("scenario %q sets no nkeySecret", sc.name)
	}
	pod := pods(renderScenario(t, c, sc.values))["Deployment/wrench-worker"]
	w := containerByName(pod, "wrench")
	args := list(w, "args")
	for _, want := range []string{"--nats-nkey=/etc/wrench/nats/worker.nk", "--nats-ca=/etc/wrench/nats/ca.pem"} {
		if !slices.Contains(args, any(want)) {
			t.Errorf("worker args %v lack %s", args, want)
		}
	}
	for _, a := range args {
		if s, _ := a.(string); strings.HasPrefix(s, "--nats-creds") {
			t.Errorf("worker args carry %s with only an nkey given", s)
		}
	}
	if !mounts(pod, w, "nats-creds", "/etc/wrench/nats", "secret", "wrench-worker-nkey") {
		t.Error("Secret wrench-worker-nkey not mounted at /etc/wrench/nats")
	}
}

// mounts reports whether container w of pod mounts volume name at path,
// and the volume is the kind ("secret", "configMap") of object obj.
func mounts(pod, w map[string]any, name, path, kind, obj string) bool {
	var mounted bool
	for _, m := range list(w, "volumeMounts") {
		if str(m, "name") == name && str(m, "mountPath") == path {
			mounted = true
		}
	}
	key := map[string]string{"secret": "secretName", "configMap": "name"}[kind]
	for _, v := range list(pod, "volumes") {
		if str(v, "name") == name && str(v, kind, key) == obj {
			return mounted
		}
	}
	return false
}

// TestChartNATSListenCertificate: allInOne.natsListen.tlsSecret gives the
// embedded NATS a certificate for the Service name workers dial.
func TestChartNATSListenCertificate(t *testing.T) {
	c := loadChart(t, chartDir(t))
	sc := scenarios[2] // allInOne serving NATS to workers
	if !strings.Contains(sc.values, "tlsSecret: wrench-nats-tls") {
		t.Fatalf("scenario %q sets no natsListen.tlsSecret", sc.name)
	}
	pod := pods(renderScenario(t, c, sc.values))["StatefulSet/wrench"]
	w := containerByName(pod, "wrench")
	for _, want := range []string{"--nats-tls-cert=/etc/wrench/nats-tls/tls.crt", "--nats-tls-key=/etc/wrench/nats-tls/tls.key"} {
		if !slices.Contains(list(w, "args"), any(want)) {
			t.Errorf("serve args %v lack %s", w["args"], want)
		}
	}
	if !mounts(pod, w, "nats-tls", "/etc/wrench/nats-tls", "secret", "wrench-nats-tls") {
		t.Error("Secret wrench-nats-tls not mounted at /etc/wrench/nats-tls")
	}
}
