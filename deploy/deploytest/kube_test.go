package deploytest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// combination is one documented set of chart values.
type combination struct {
	name   string
	values string
}

// policyValues sets a server policy (wrench.policy).
const policyValues = "wrench:\n  policy: |\n    defaults:\n      max_limits: {max_turns: 40}\n"

// documentedCombinations is the cross product of the switches
// docs/operations.md documents: mode; docker.mode; in allInOne mode
// persistence and natsListen (off, on, on with its own certificate); in
// scaled mode KEDA, the API (off, API only, or API with task slots) and the
// NATS sign-in (none, credentials file, nkey seed and CA); and for both the
// ServiceMonitor, image pull secrets and a server policy.
func documentedCombinations() []combination {
	var out []combination
	add := func(name, values string) {
		out = append(out, combination{name: name, values: secretValues + values})
	}
	extras := []struct{ name, values string }{
		{"", ""},
		{"+servicemonitor", "serviceMonitor: {enabled: true}\n"},
		{"+pullsecrets+policy", "imagePullSecrets: [{name: registry-creds}]\nsandbox: {image: registry.example.com/wrench-sandbox:1}\n" + policyValues},
		{"+servicemonitor+pullsecrets+policy", "serviceMonitor: {enabled: true}\nimagePullSecrets: [{name: registry-creds}]\nsandbox: {image: registry.example.com/wrench-sandbox:1}\n" + policyValues},
	}
	for _, engine := range []string{"dind", "hostSocket"} {
		for _, persist := range []bool{true, false} {
			for _, natsListen := range []string{"off", "on", "onWithCert"} {
				listen := map[string]string{"off": "{enabled: false}", "on": "{enabled: true}",
					"onWithCert": "{enabled: true, tlsSecret: wrench-nats-tls}"}[natsListen]
				for _, x := range extras {
					add(fmt.Sprintf("allInOne/%s/persistence=%v/natsListen=%s%s", engine, persist, natsListen, x.name),
						fmt.Sprintf("docker: {mode: %s}\nallInOne: {persistence: {enabled: %v}, natsListen: %s}\n%s",
							engine, persist, listen, x.values))
				}
			}
		}
		for _, keda := range []bool{true, false} {
			for _, api := range []string{"off", "apiOnly", "apiWithSlots"} {
				for _, signIn := range []string{"none", "creds", "nkey"} {
					for _, x := range extras {
						v := fmt.Sprintf("mode: scaled\ndocker: {mode: %s}\nkeda: {enabled: %v}\n", engine, keda)
						nats := `nats: {url: "nats://nats.nats.svc:4222", monitoringEndpoint: "nats.nats.svc:8222"`
						switch signIn {
						case "creds":
							nats += ", credsSecret: nats-creds"
						case "nkey":
							nats += ", nkeySecret: wrench-worker-nkey, caKey: ca.pem"
						}
						v += nats + "}\n"
						switch api {
						case "off":
							v += "api: {enabled: false}\n"
						case "apiWithSlots":
							v += "api: {slots: 2}\n"
						}
						add(fmt.Sprintf("scaled/%s/keda=%v/api=%s/natsSignIn=%s%s", engine, keda, api, signIn, x.name), v+x.values)
					}
				}
			}
		}
	}
	return out
}

// TestHelmMatrix renders every documented combination with the real helm,
// lints it with `helm lint --strict`, and applies the objects with
// `kubectl apply --dry-run=server` to a real kube-apiserver holding the KEDA
// and Prometheus Operator CRDs, which validates every field (CRD schemas
// included) and runs admission. Each combination renders under its own
// release name, so one apply holds them all.
func TestHelmMatrix(t *testing.T) {
	c := loadChart(t, chartDir(t))
	k := needKubeAPI(t)
	combos := documentedCombinations()
	type result struct {
		docs string
		err  error
	}
	results := make([]result, len(combos))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for i, cb := range combos {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if out, err := c.lint(cb.values); err != nil {
				results[i].err = fmt.Errorf("helm lint --strict: %v\n%s", err, out)
				return
			}
			r, err := c.renderRelease(fmt.Sprintf("m%d", i), cb.values)
			results[i] = result{docs: r.yamlDocs(), err: err}
		})
	}
	wg.Wait()
	var all strings.Builder
	objects := 0
	for i, r := range results {
		if r.err != nil {
			t.Errorf("%s: %v", combos[i].name, r.err)
			continue
		}
		all.WriteString(r.docs)
		objects += strings.Count(r.docs, "\nkind: ")
	}
	if t.Failed() {
		return
	}
	out, err := k.applyServerDryRun(all.String())
	if err != nil {
		// Name the combination of each refused object by its release.
		release := regexp.MustCompile(`"(m\d+)[-"]`)
		seen := map[string]bool{}
		for _, m := range release.FindAllStringSubmatch(out, -1) {
			var i int
			fmt.Sscanf(m[1], "m%d", &i)
			if !seen[m[1]] && i < len(combos) {
				seen[m[1]] = true
				t.Errorf("refused in %s (release %s)", combos[i].name, m[1])
			}
		}
		t.Fatalf("kubectl apply --dry-run=server: %v\n%s", err, out)
	}
	created := strings.Count(out, "(server dry run)")
	if created != objects {
		t.Errorf("the apiserver accepted %d objects of %d:\n%s", created, objects, out)
	}
	kinds := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		if kind, _, ok := strings.Cut(l, "/"); ok {
			kinds[kind]++
		}
	}
	var ks []string
	for k, n := range kinds {
		ks = append(ks, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(ks)
	t.Logf("%d combinations rendered, linted --strict and applied server-side: %d objects (%s)", len(combos), created, strings.Join(ks, ", "))
}

// upgradeStep is one release of TestHelmUpgrade: the values it upgrades
// to and, when the upgrade must be refused, what the refusal says.
type upgradeStep struct {
	name, values, refusal string
}

// TestHelmUpgrade installs the chart for real into the test apiserver and
// upgrades it release after release through changes of persistence,
// docker.mode and mode, as an operator would: every upgrade succeeds,
// except a switch that would leave the all-in-one queue's volume (its
// tasks, states and results) behind unannounced, which is refused with
// what to do; acknowledged, it goes through and the volume is kept.
func TestHelmUpgrade(t *testing.T) {
	c := loadChart(t, chartDir(t))
	k := needKubeAPI(t)
	const release = "up"
	const claim = "data-up-wrench-0"
	scaled := "mode: scaled\nnats: {url: \"nats://nats.nats.svc:4222\", monitoringEndpoint: \"nats.nats.svc:8222\"}\n"
	steps := []upgradeStep{
		{name: "allInOne, dind, persistence (defaults)", values: ""},
		{name: "persistence off, unacknowledged", values: "allInOne: {persistence: {enabled: false}}\n", refusal: claim},
		{name: "persistence off", values: "allInOne: {persistence: {enabled: false, leaveBehind: true}}\n"},
		{name: "node engine", values: "allInOne: {persistence: {enabled: false, leaveBehind: true}}\ndocker: {mode: hostSocket}\n"},
		{name: "node engine with persistence", values: "docker: {mode: hostSocket}\n"},
		{name: "dind again", values: ""},
		{name: "scaled, unacknowledged", values: scaled, refusal: claim},
		{name: "scaled", values: scaled + "allInOne: {persistence: {leaveBehind: true}}\n"},
		{name: "scaled, node engine, API with slots, no KEDA",
			values: scaled + "allInOne: {persistence: {leaveBehind: true}}\ndocker: {mode: hostSocket}\napi: {slots: 2}\nkeda: {enabled: false}\n"},
		{name: "scaled with a policy, workers signed in with an nkey",
			values: strings.Replace(scaled, "}\n", ", nkeySecret: wrench-worker-nkey, caKey: ca.pem}\n", 1) +
				"allInOne: {persistence: {leaveBehind: true}}\n" + policyValues},
		{name: "back to allInOne, serving NATS with its own certificate, no policy",
			values: "allInOne: {natsListen: {enabled: true, tlsSecret: wrench-nats-tls}}\n"},
	}
	t.Cleanup(func() { k.helmRun(c.helm, "uninstall", release, "-n", "tools") })
	for i, st := range steps {
		start := time.Now()
		out, err := c.upgrade(k, release, secretValues+st.values)
		t.Logf("step %d (%s): %s", i, st.name, time.Since(start).Round(time.Millisecond))
		if st.refusal != "" {
			if err == nil || !strings.Contains(out, st.refusal) {
				t.Fatalf("step %d (%s): err %v, want a refusal naming %q:\n%s", i, st.name, err, st.refusal, out)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d (%s): helm upgrade: %v\n%s", i, st.name, err, out)
		}
	}
	// The queue's volume outlived the switch to scaled mode.
	if out, err := k.kubectlRun("get", "pvc", claim, "-n", "tools"); err != nil {
		t.Errorf("the all-in-one queue's PersistentVolumeClaim is gone after the switch: %v\n%s", err, out)
	}
	out, _ := k.helmRun(c.helm, "history", release, "-n", "tools")
	t.Logf("%d releases:\n%s", len(steps), out)
}

// upgrade runs `helm upgrade --install` of the chart with values against
// the apiserver, and waits for nothing (no controller runs there).
func (c *chart) upgrade(k *kubeAPI, release, values string) (string, error) {
	vf, err := os.CreateTemp(k.dir, "values-*.yaml")
	if err != nil {
		return "", err
	}
	defer os.Remove(vf.Name())
	vf.WriteString(values)
	vf.Close()
	return k.helmRun(c.helm, "upgrade", "--install", release, c.dir, "-n", "tools", "-f", vf.Name())
}

// TestHelmUpgradeFromVolumeClaimTemplate: a release made by chart 0.1.x
// has a StatefulSet with a volumeClaimTemplate, which Kubernetes cannot
// change; the upgrade is refused with the commands that move it on, and
// after running exactly those it goes through and mounts the same claim.
func TestHelmUpgradeFromVolumeClaimTemplate(t *testing.T) {
	c := loadChart(t, chartDir(t))
	k := needKubeAPI(t)
	const release, sts, claim = "old", "old-wrench", "data-old-wrench-0"
	t.Cleanup(func() { k.helmRun(c.helm, "uninstall", release, "-n", "tools") })
	// The release as 0.1.x left it: its StatefulSet with a claim template
	// (owned by the release), and the claim the StatefulSet controller
	// made from it (not owned by the release).
	if out, err := c.upgrade(k, release, secretValues+"allInOne: {persistence: {enabled: false}}\n"); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	if out, err := k.kubectlRun("delete", "statefulset", sts, "-n", "tools"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	old := fmt.Sprintf(`apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: %[1]s
  namespace: tools
  labels: {app.kubernetes.io/managed-by: Helm}
  annotations: {meta.helm.sh/release-name: %[2]s, meta.helm.sh/release-namespace: tools}
spec:
  serviceName: %[1]s-headless
  selector: {matchLabels: {app.kubernetes.io/name: wrench, app.kubernetes.io/instance: %[2]s, app.kubernetes.io/component: server}}
  template:
    metadata: {labels: {app.kubernetes.io/name: wrench, app.kubernetes.io/instance: %[2]s, app.kubernetes.io/component: server}}
    spec:
      containers: [{name: wrench, image: wrench:0.1.0, volumeMounts: [{name: data, mountPath: /var/lib/wrench}]}]
  volumeClaimTemplates:
    - metadata: {name: data}
      spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 20Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: %[3]s
  namespace: tools
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 20Gi}}}
`, sts, release, claim)
	f := filepath.Join(k.dir, "old.yaml")
	must(t, os.WriteFile(f, []byte(old), 0o644))
	if out, err := k.kubectlRun("apply", "-f", f); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}

	out, err := c.upgrade(k, release, secretValues)
	if err == nil || !strings.Contains(out, "volumeClaimTemplate") {
		t.Fatalf("upgrade over a 0.1.x StatefulSet: err %v, want a refusal naming the volumeClaimTemplate:\n%s", err, out)
	}
	// Run the commands the refusal gives, as written.
	_, cmds, ok := strings.Cut(out, "Once, before this upgrade: ")
	cmds, _, _ = strings.Cut(cmds, ". The pod")
	if !ok {
		t.Fatalf("the refusal gives no commands:\n%s", out)
	}
	for _, cmd := range strings.Split(cmds, "; ") {
		args := strings.Fields(cmd)
		if len(args) < 2 || args[0] != "kubectl" {
			t.Fatalf("not a kubectl command: %q", cmd)
		}
		orphan := slices.Contains(args, "--cascade=orphan")
		if orphan {
			// kubectl waits for the garbage collector, which does not
			// run here: do its part, removing the orphan finalizer.
			args = append(args, "--wait=false")
		}
		if out, err := k.kubectlRun(args[1:]...); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		if orphan {
			if out, err := k.kubectlRun("patch", "statefulset", sts, "-n", "tools", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`); err != nil {
				t.Fatalf("remove the orphan finalizer: %v\n%s", err, out)
			}
		}
	}
	if out, err := c.upgrade(k, release, secretValues); err != nil {
		t.Fatalf("upgrade after the commands: %v\n%s", err, out)
	}
	out, err = k.kubectlRun("get", "statefulset", sts, "-n", "tools", "-o", "jsonpath={.spec.template.spec.volumes[?(@.name==\"data\")].persistentVolumeClaim.claimName}")
	if err != nil || out != claim {
		t.Errorf("the new StatefulSet mounts %q (%v), want the old claim %s", out, err, claim)
	}
}
