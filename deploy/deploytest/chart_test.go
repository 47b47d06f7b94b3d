package deploytest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/wrenchworks/wrench/queue"
)

// repoRoot is the module root (where go.mod is).
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}

func chartDir(t *testing.T) string { return filepath.Join(repoRoot(t), "charts", "wrench") }

// scenario is one set of values the chart must render.
type scenario struct {
	name   string
	values string
	// kinds lists kind/name-suffix of every object the render must hold,
	// and nothing else.
	kinds []string
}

const secretValues = "secrets: {existingSecret: wrench-secrets}\n"

var scenarios = []scenario{
	{
		name:   "allInOne with dind (defaults)",
		values: secretValues,
		kinds: []string{"ConfigMap/wrench-bootstrap", "PersistentVolumeClaim/data-wrench-0", "Service/wrench", "Service/wrench-headless",
			"ServiceAccount/wrench", "StatefulSet/wrench"},
	},
	{
		name:   "allInOne on the node's engine",
		values: secretValues + "docker: {mode: hostSocket, hostSocket: {socketGroup: 998}}\n",
		kinds: []string{"ConfigMap/wrench-bootstrap", "PersistentVolumeClaim/data-wrench-0", "Service/wrench", "Service/wrench-headless",
			"ServiceAccount/wrench", "StatefulSet/wrench"},
	},
	{
		name: "allInOne without persistence, NATS for workers, ServiceMonitor",
		values: secretValues + `
allInOne: {persistence: {enabled: false}, natsListen: {enabled: true, tlsSecret: wrench-nats-tls}}
serviceMonitor: {enabled: true}
llm: {baseURL: "http://llm.internal/v1", model: gpt-4.1}
wrench: {otlpEndpoint: "http://otel:4318", extraArgs: ["--per-repo=1"]}
`,
		kinds: []string{"ConfigMap/wrench-bootstrap", "NetworkPolicy/wrench-nats", "Service/wrench",
			"Service/wrench-headless", "ServiceAccount/wrench", "ServiceMonitor/wrench", "StatefulSet/wrench"},
	},
	{
		name: "scaled with KEDA",
		values: secretValues + `
mode: scaled
nats: {url: "nats://nats.nats.svc:4222", monitoringEndpoint: "nats.nats.svc:8222", credsSecret: nats-creds}
wrench:
  slots: 3
  policy: |
    defaults:
      max_limits: {max_turns: 40, memory_mb: 2048}
      models: [gpt-4.1]
    tenants:
      - {name: payments, repositories: ["https://github.com/acme/payments*"]}
      - {name: default, max_running: 4}
      - {name: data-eng, github: [acme-data]}
serviceMonitor: {enabled: true}
`,
		kinds: []string{"ConfigMap/wrench-bootstrap", "ConfigMap/wrench-policy", "Deployment/wrench-api", "Deployment/wrench-worker",
			"ScaledObject/wrench-worker", "Service/wrench", "Service/wrench-worker-metrics",
			"ServiceAccount/wrench", "ServiceMonitor/wrench"},
	},
	{
		name: "scaled workers only, fixed replicas, node engine",
		values: secretValues + `
mode: scaled
nats: {url: "tls://wrench.tools.svc:4222", nkeySecret: wrench-worker-nkey, caKey: ca.pem}
api: {enabled: false}
keda: {enabled: false}
worker: {replicas: 3}
docker: {mode: hostSocket}
serviceAccount: {create: false}
`,
		kinds: []string{"ConfigMap/wrench-bootstrap", "Deployment/wrench-worker", "Service/wrench-worker-metrics"},
	},
}

func renderScenario(t *testing.T, c *chart, values string) []manifest {
	t.Helper()
	r, err := c.render(values)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := r.manifests()
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func TestChartMetadata(t *testing.T) {
	c := loadChart(t, chartDir(t))
	m := c.meta
	if m.APIVersion != "v2" || m.Name != "wrench" || m.Type != "application" {
		t.Errorf("Chart.yaml: apiVersion %q name %q type %q, want v2 wrench application", m.APIVersion, m.Name, m.Type)
	}
	semver := regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)
	if !semver.MatchString(m.Version) {
		t.Errorf("Chart.yaml version %q is not SemVer 2", m.Version)
	}
	if m.AppVersion == "" || m.Description == "" || m.KubeVersion == "" {
		t.Errorf("Chart.yaml lacks appVersion, description or kubeVersion: %+v", m)
	}
	for _, key := range []string{"mode", "image", "secrets", "docker", "sandbox", "wrench", "nats", "keda",
		"podSecurityContext", "securityContext", "serviceMonitor"} {
		if _, ok := c.values[key]; !ok {
			t.Errorf("values.yaml lacks %q", key)
		}
	}
	if _, ok := c.templates["NOTES.txt"]; !ok {
		t.Error("templates/NOTES.txt is missing")
	}
	for name := range c.templates {
		if !strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".tpl") && name != "NOTES.txt" {
			t.Errorf("templates/%s: unexpected file (templates are .yaml, helpers .tpl)", name)
		}
	}
}

// TestChartRenders renders every scenario and checks each object is valid
// YAML with the standard labels, and that every template file renders to
// something in at least one scenario.
func TestChartRenders(t *testing.T) {
	c := loadChart(t, chartDir(t))
	used := map[string]bool{}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			ms := renderScenario(t, c, sc.values)
			var got []string
			for _, m := range ms {
				used[m.file] = true
				got = append(got, m.kind()+"/"+m.name())
				if str(m.obj, "apiVersion") == "" || m.kind() == "" || m.name() == "" {
					t.Errorf("%s: object without apiVersion, kind or name: %v", m.file, m.obj)
				}
				if len(m.name()) > 63 {
					t.Errorf("%s: name %q is longer than 63", m.file, m.name())
				}
				labels, _ := get(m.obj, "metadata", "labels").(map[string]any)
				for _, l := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance",
					"app.kubernetes.io/managed-by", "helm.sh/chart"} {
					if labels[l] == nil {
						t.Errorf("%s %s lacks label %s", m.kind(), m.name(), l)
					}
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, sc.kinds) {
				t.Errorf("objects:\n got %v\nwant %v", got, sc.kinds)
			}
			r, err := c.render(sc.values)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(r.notes, "wrench") || strings.Contains(r.notes, "<no value>") {
				t.Errorf("NOTES.txt renders badly:\n%s", r.notes)
			}
		})
	}
	for name := range c.templates {
		if strings.HasPrefix(name, "_") || name == "NOTES.txt" {
			continue
		}
		if !used[name] {
			t.Errorf("templates/%s renders to nothing in every scenario: add one that covers it", name)
		}
	}
}

// TestChartRejects checks that values which cannot work fail the render
// with a message saying what to set.
func TestChartRejects(t *testing.T) {
	c := loadChart(t, chartDir(t))
	for _, tc := range []struct {
		name, values, want string
	}{
		{"no secret", "", "secrets.existingSecret is required"},
		{"no api token key", "secrets: {existingSecret: s, keys: {apiToken: ''}}", "apiToken is required"},
		// values.schema.json, which helm enforces before rendering.
		{"unknown mode", secretValues + "mode: cluster", "at '/mode': value must be one of 'allInOne', 'scaled'"},
		{"unknown engine", secretValues + "docker: {mode: podman}", "at '/docker/mode': value must be one of 'dind', 'hostSocket'"},
		{"relative data dir", secretValues + "dataDir: data", "at '/dataDir': 'data' does not match pattern '^/'"},
		{"relative host data dir", secretValues + "docker: {hostSocket: {hostDataDir: data}}", "at '/docker/hostSocket/hostDataDir'"},
		{"no slots", secretValues + "wrench: {slots: 0}", "at '/wrench/slots': minimum: got 0, want 1"},
		{"scaled without nats", secretValues + "mode: scaled", "nats.url is required"},
		{"keda without monitor", secretValues + "mode: scaled\nnats: {url: 'nats://n:4222'}", "nats.monitoringEndpoint"},
		{"two NATS sign-ins", secretValues + "mode: scaled\nkeda: {enabled: false}\nnats: {url: 'nats://n:4222', credsSecret: a, nkeySecret: b}", "nats.credsSecret and nats.nkeySecret are two ways"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.render(tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("render error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// runsNoTask reports whether a pod's wrench runs with --slots=0.
func runsNoTask(pod map[string]any) bool {
	return slices.Contains(list(containerByName(pod, "wrench"), "args"), any("--slots=0"))
}

// pods returns the pod templates of the workloads in ms.
func pods(ms []manifest) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, m := range ms {
		switch m.kind() {
		case "StatefulSet", "Deployment":
			spec, _ := get(m.obj, "spec", "template", "spec").(map[string]any)
			out[m.kind()+"/"+m.name()] = spec
		}
	}
	return out
}

// containerByName finds a container or init container of a pod spec.
func containerByName(pod map[string]any, name string) map[string]any {
	for _, key := range []string{"containers", "initContainers"} {
		for _, c := range list(pod, key) {
			if str(c, "name") == name {
				return c.(map[string]any)
			}
		}
	}
	return nil
}

func envValue(c map[string]any, name string) (value string, entry map[string]any) {
	for _, e := range list(c, "env") {
		if str(e, "name") == name {
			return str(e, "value"), e.(map[string]any)
		}
	}
	return "", nil
}

func mountPath(c map[string]any, volume string) string {
	for _, m := range list(c, "volumeMounts") {
		if str(m, "name") == volume {
			return str(m, "mountPath")
		}
	}
	return ""
}

func TestChartPodSecurity(t *testing.T) {
	c := loadChart(t, chartDir(t))
	for _, sc := range scenarios {
		for name, pod := range pods(renderScenario(t, c, sc.values)) {
			t.Run(sc.name+"/"+name, func(t *testing.T) {
				if v, ok := pod["automountServiceAccountToken"].(bool); !ok || v {
					t.Error("automountServiceAccountToken is not false")
				}
				if get(pod, "securityContext", "runAsNonRoot") != true || get(pod, "securityContext", "runAsUser") != 1000 {
					t.Errorf("pod securityContext %v: want runAsNonRoot and uid 1000 (the sandbox user)", pod["securityContext"])
				}
				if str(pod, "securityContext", "seccompProfile", "type") != "RuntimeDefault" {
					t.Error("pod seccompProfile is not RuntimeDefault")
				}
				w := containerByName(pod, "wrench")
				sc := w["securityContext"]
				if get(sc, "allowPrivilegeEscalation") != false || get(sc, "readOnlyRootFilesystem") != true ||
					get(sc, "privileged") != false || !slices.Equal(list(sc, "capabilities", "drop"), []any{"ALL"}) ||
					get(sc, "capabilities", "add") != nil || get(sc, "runAsUser") != nil {
					t.Errorf("wrench container securityContext %v is not locked down", sc)
				}
				b := containerByName(pod, "bootstrap")
				if b == nil && !runsNoTask(pod) {
					t.Fatal("a pod that runs tasks has no bootstrap")
				}
				if b != nil && (!slices.Equal(list(b, "securityContext", "capabilities", "add"), []any{"CHOWN"}) ||
					get(b, "securityContext", "privileged") == true || get(b, "securityContext", "allowPrivilegeEscalation") != false) {
					t.Errorf("bootstrap securityContext %v: want only CHOWN added, no privilege", b["securityContext"])
				}
				for _, key := range []string{"containers", "initContainers"} {
					for _, ct := range list(pod, key) {
						if get(ct, "securityContext", "privileged") == true && str(ct, "name") != "dind" {
							t.Errorf("container %s is privileged; only the dind sidecar may be", str(ct, "name"))
						}
					}
				}
				grace := 0
				for _, a := range list(w, "args") {
					if s, _ := a.(string); strings.HasPrefix(s, "--grace=") {
						fmt.Sscanf(s, "--grace=%ds", &grace)
					}
				}
				if got := pod["terminationGracePeriodSeconds"]; grace == 0 || got != grace+30 {
					t.Errorf("terminationGracePeriodSeconds %v, want --grace (%ds) + 30", got, grace)
				}
			})
		}
	}
}

// TestChartSecretsNeverInline checks that the chart creates no Secret and
// that every secret environment variable comes from a secretKeyRef.
func TestChartSecretsNeverInline(t *testing.T) {
	c := loadChart(t, chartDir(t))
	secretEnv := map[string]bool{"WRENCH_API_TOKEN": true, "WRENCH_LLM_API_KEY": true, "WRENCH_GIT_TOKEN": true,
		"OPENAI_API_KEY": true, "GITHUB_TOKEN": true}
	keys := "secrets: {existingSecret: wrench-secrets, keys: {gitToken: git-token}}\n"
	for _, sc := range scenarios {
		ms := renderScenario(t, c, strings.Replace(sc.values, secretValues, keys, 1))
		for _, m := range ms {
			if m.kind() == "Secret" {
				t.Errorf("%s: the chart renders a Secret; it must only reference one", sc.name)
			}
		}
		for name, pod := range pods(ms) {
			for _, key := range []string{"containers", "initContainers"} {
				for _, ct := range list(pod, key) {
					for _, e := range list(ct, "env") {
						if !secretEnv[str(e, "name")] {
							continue
						}
						if get(e, "value") != nil || str(e, "valueFrom", "secretKeyRef", "name") != "wrench-secrets" {
							t.Errorf("%s %s: %s is not taken from the existing Secret: %v", sc.name, name, str(e, "name"), e)
						}
					}
				}
			}
			w := containerByName(pod, "wrench")
			_, tok := envValue(w, "WRENCH_API_TOKEN")
			serve := str(w, "args", 0) == "serve"
			if serve != (tok != nil) {
				t.Errorf("%s %s: WRENCH_API_TOKEN given to %q: want it exactly for serve", sc.name, name, str(w, "args", 0))
			}
			if _, git := envValue(w, "WRENCH_GIT_TOKEN"); git == nil {
				t.Errorf("%s %s: secrets.keys.gitToken set but WRENCH_GIT_TOKEN missing", sc.name, name)
			}
			if b := containerByName(pod, "bootstrap"); b != nil {
				for _, e := range list(b, "env") {
					if secretEnv[str(e, "name")] {
						t.Errorf("%s %s: bootstrap gets secret %s", sc.name, name, str(e, "name"))
					}
				}
			}
		}
	}
	// The defaults carry key names only, never a secret value.
	raw, err := os.ReadFile(filepath.Join(chartDir(t), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	for k, val := range get(v, "secrets").(map[string]any) {
		if k != "existingSecret" && k != "keys" {
			t.Errorf("values.yaml secrets.%s = %v: only existingSecret and keys belong there", k, val)
		}
	}
}

// TestChartEngineSeesDataDir checks the invariant sandboxes depend on: the
// Docker engine bind-mounts workspaces and the copy of the wrench binary
// (the in-sandbox helper) wrench makes in its data directory by the paths
// the wrench process uses, so the data directory must be at the same path
// for the engine; wrench runs the image's own binary.
func TestChartEngineSeesDataDir(t *testing.T) {
	c := loadChart(t, chartDir(t))
	for _, sc := range scenarios {
		ms := renderScenario(t, c, sc.values)
		for name, pod := range pods(ms) {
			t.Run(sc.name+"/"+name, func(t *testing.T) {
				if runsNoTask(pod) {
					t.Skip("runs no task: no engine (TestChartAPIOnlyNeedsNoEngine)")
				}
				w := containerByName(pod, "wrench")
				boot := containerByName(pod, "bootstrap")
				dataDir, _ := envValue(w, "WRENCH_DATA_DIR")
				if bd, _ := envValue(boot, "WRENCH_DATA_DIR"); bd != dataDir || dataDir == "" {
					t.Fatalf("WRENCH_DATA_DIR: wrench %q, bootstrap %q", dataDir, bd)
				}
				if w["command"] != nil {
					t.Errorf("wrench command %v: want the image's entrypoint", w["command"])
				}
				if !slices.Contains(list(w, "args"), any("--data-dir=$(WRENCH_DATA_DIR)")) {
					t.Errorf("wrench args %v lack --data-dir=$(WRENCH_DATA_DIR)", w["args"])
				}
				// POD_NAME must be defined before WRENCH_DATA_DIR refers to it.
				envs := list(w, "env")
				if str(envs, 0, "name") != "POD_NAME" {
					t.Errorf("first env var is %q, want POD_NAME", str(envs, 0, "name"))
				}
				mount := mountPath(w, "data")
				if mount == "" || mountPath(boot, "data") != mount || !strings.HasPrefix(dataDir, mount) {
					t.Errorf("data volume at %q in wrench, %q in bootstrap; data dir %q", mount, mountPath(boot, "data"), dataDir)
				}
				host, _ := envValue(w, "DOCKER_HOST")
				if dind := containerByName(pod, "dind"); dind != nil {
					if mountPath(dind, "data") != mount {
						t.Errorf("dind mounts the data volume at %q, wrench at %q: the engine would not find workspaces", mountPath(dind, "data"), mount)
					}
					if get(dind, "restartPolicy") != "Always" {
						t.Error("dind is not a native sidecar (restartPolicy: Always)")
					}
					if host != "unix:///var/run/dind/docker.sock" || mountPath(w, "dind-socket") != "/var/run/dind" ||
						!slices.Contains(list(dind, "args"), any("--host=unix:///var/run/dind/docker.sock")) {
						t.Errorf("DOCKER_HOST %q does not match the dind socket", host)
					}
					if !slices.Contains(list(dind, "args"), any("--group=1000")) {
						t.Error("dind socket is not group 1000: the wrench user could not use it")
					}
					initNames := []string{}
					for _, ic := range list(pod, "initContainers") {
						initNames = append(initNames, str(ic, "name"))
					}
					if !slices.Equal(initNames, []string{"dind", "bootstrap"}) {
						t.Errorf("init containers %v: dind must start before bootstrap", initNames)
					}
				} else {
					var hostPath, sock string
					for _, v := range list(pod, "volumes") {
						switch str(v, "name") {
						case "data":
							hostPath = str(v, "hostPath", "path")
						case "docker-socket":
							sock = str(v, "hostPath", "path")
						}
					}
					if hostPath != mount || !strings.HasSuffix(dataDir, "/$(POD_NAME)") {
						t.Errorf("host data dir %q mounted at %q, data dir %q: want the same path, one directory per pod", hostPath, mount, dataDir)
					}
					if sock == "" || host != "unix:///var/run/docker.sock" || mountPath(w, "docker-socket") != "/var/run/docker.sock" {
						t.Errorf("node socket %q, DOCKER_HOST %q", sock, host)
					}
					if len(list(pod, "securityContext", "supplementalGroups")) != 1 {
						t.Error("pod does not join the socket's group")
					}
				}
			})
		}
	}
}

// TestChartKEDA checks the ScaledObject against KEDA's nats-jetstream
// trigger and the queue's real stream and consumer names: one trigger per
// tenant the policy names, summed by a scaling modifier; one alone
// without tenants.
func TestChartKEDA(t *testing.T) {
	c := loadChart(t, chartDir(t))
	ms := renderScenario(t, c, scenarios[3].values)
	var so, worker map[string]any
	for _, m := range ms {
		switch m.kind() + "/" + m.name() {
		case "ScaledObject/wrench-worker":
			so = m.obj
		case "Deployment/wrench-worker":
			worker = m.obj
		}
	}
	if so == nil || worker == nil {
		t.Fatal("no ScaledObject or worker Deployment")
	}
	if str(so, "apiVersion") != "keda.sh/v1alpha1" {
		t.Errorf("apiVersion %q", str(so, "apiVersion"))
	}
	if str(so, "spec", "scaleTargetRef", "name") != str(worker, "metadata", "name") ||
		str(so, "spec", "scaleTargetRef", "kind") != "Deployment" {
		t.Errorf("scaleTargetRef %v does not name the worker Deployment", get(so, "spec", "scaleTargetRef"))
	}
	if get(worker, "spec", "replicas") != nil {
		t.Error("worker Deployment sets replicas while KEDA owns them")
	}
	// The scenario's policy names tenants payments, default and data-eng:
	// a trigger per tenant consumer, the default tenant's first, summed.
	trig := list(so, "spec", "triggers")
	consumers := []string{queue.WorkersConsumer, queue.TenantConsumer("payments"), queue.TenantConsumer("data-eng")}
	if len(trig) != len(consumers) {
		t.Fatalf("triggers %v: want one nats-jetstream trigger per tenant consumer %v", trig, consumers)
	}
	for i, cons := range consumers {
		want := map[string]any{
			"natsServerMonitoringEndpoint": "nats.nats.svc:8222",
			"account":                      "$G",
			"stream":                       queue.TasksStream,
			"consumer":                     cons,
			"lagThreshold":                 "3", // = wrench.slots of the scenario
			"activationLagThreshold":       "0",
			"useHttps":                     "false",
		}
		got := get(trig, i, "metadata").(map[string]any)
		if str(trig, i, "type") != "nats-jetstream" || str(trig, i, "name") != fmt.Sprintf("t%d", i) || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("trigger %d: type %q name %q metadata\n got %v\nwant %v", i, str(trig, i, "type"), str(trig, i, "name"), got, want)
		}
	}
	mod := get(so, "spec", "advanced", "scalingModifiers")
	if str(so, "spec", "advanced", "scalingModifiers", "formula") != "t0 + t1 + t2" ||
		str(so, "spec", "advanced", "scalingModifiers", "target") != "3" ||
		str(so, "spec", "advanced", "scalingModifiers", "metricType") != "AverageValue" {
		t.Errorf("scaling modifiers %v: want the triggers summed against the slots", mod)
	}
	// Without tenants: the one trigger, unnamed, and no modifiers.
	for _, m := range renderScenario(t, c, strings.Replace(scenarios[3].values, "    tenants:", "    other:", 1)) {
		if m.kind() != "ScaledObject" {
			continue
		}
		if trig := list(m.obj, "spec", "triggers"); len(trig) != 1 || str(trig, 0, "name") != "" ||
			str(trig, 0, "metadata", "consumer") != queue.WorkersConsumer || get(m.obj, "spec", "advanced", "scalingModifiers") != nil {
			t.Errorf("without tenants: triggers %v, modifiers %v", trig, get(m.obj, "spec", "advanced", "scalingModifiers"))
		}
	}
	// Without KEDA the Deployment has a replica count of its own.
	ms = renderScenario(t, c, scenarios[4].values)
	for _, m := range ms {
		if m.kind() == "Deployment" && get(m.obj, "spec", "replicas") != 3 {
			t.Errorf("worker replicas %v, want 3", get(m.obj, "spec", "replicas"))
		}
	}
}

// TestChartServiceMonitor checks the ServiceMonitor scrapes every pod's
// metrics port through exactly one Service: a pod reached through two
// Services would be two targets, and every sum() would count it twice.
func TestChartServiceMonitor(t *testing.T) {
	c := loadChart(t, chartDir(t))
	for _, sc := range []scenario{scenarios[2], scenarios[3]} {
		ms := renderScenario(t, c, sc.values)
		var sm map[string]any
		for _, m := range ms {
			if m.kind() == "ServiceMonitor" {
				sm = m.obj
			}
		}
		if sm == nil {
			t.Fatalf("%s: no ServiceMonitor", sc.name)
		}
		endpointPorts := map[string]bool{}
		for _, ep := range list(sm, "spec", "endpoints") {
			if str(ep, "path") != "/metrics" {
				t.Errorf("%s: endpoint %v does not scrape /metrics", sc.name, ep)
			}
			endpointPorts[str(ep, "port")] = true
		}
		want, _ := get(sm, "spec", "selector", "matchLabels").(map[string]any)
		scraped := map[string]string{} // component/port -> Service
		for _, m := range ms {
			if m.kind() != "Service" {
				continue
			}
			labels, _ := get(m.obj, "metadata", "labels").(map[string]any)
			selected := true
			for k, v := range want {
				if labels[k] != v {
					selected = false
				}
			}
			if !selected {
				continue
			}
			component := str(m.obj, "spec", "selector", "app.kubernetes.io/component")
			for _, p := range list(m.obj, "spec", "ports") {
				if !endpointPorts[str(p, "name")] {
					continue
				}
				key := component + "/" + str(p, "targetPort")
				if other, dup := scraped[key]; dup {
					t.Errorf("%s: pods of %s are scraped through both %s and %s", sc.name, key, other, m.name())
				}
				scraped[key] = m.name()
			}
		}
		var workloads []string
		for _, m := range ms {
			if m.kind() == "StatefulSet" || m.kind() == "Deployment" {
				workloads = append(workloads, str(m.obj, "spec", "selector", "matchLabels", "app.kubernetes.io/component"))
			}
		}
		for _, comp := range workloads {
			found := false
			for key := range scraped {
				if strings.HasPrefix(key, comp+"/") {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: the %s pods are not scraped (scraped: %v)", sc.name, comp, scraped)
			}
		}
	}
}

// TestChartAPIOnlyNeedsNoEngine: in scaled mode the API runs no task by
// default (api.slots 0), so its pod has no Docker engine, no bootstrap and
// nothing privileged; with api.slots it gets the engine like a worker.
func TestChartAPIOnlyNeedsNoEngine(t *testing.T) {
	c := loadChart(t, chartDir(t))
	for _, engine := range []string{"dind", "hostSocket"} {
		base := scenarios[3].values + "docker: {mode: " + engine + "}\n"
		api := pods(renderScenario(t, c, base))["Deployment/wrench-api"]
		if api == nil {
			t.Fatal("no API Deployment")
		}
		w := containerByName(api, "wrench")
		if !runsNoTask(api) {
			t.Errorf("%s: API args %v: want --slots=0 by default", engine, w["args"])
		}
		if len(list(api, "initContainers")) != 0 || len(list(api, "containers")) != 1 {
			t.Errorf("%s: API pod has init containers %v and %d containers: want wrench alone", engine, list(api, "initContainers"), len(list(api, "containers")))
		}
		if _, e := envValue(w, "DOCKER_HOST"); e != nil {
			t.Errorf("%s: API pod gets DOCKER_HOST", engine)
		}
		for _, v := range list(api, "volumes") {
			if n := str(v, "name"); n == "docker-socket" || n == "dind-socket" || n == "dind-storage" || get(v, "hostPath") != nil {
				t.Errorf("%s: API pod mounts %s", engine, n)
			}
		}
		if get(api, "securityContext", "supplementalGroups") != nil {
			t.Errorf("%s: API pod joins the docker group", engine)
		}
		withSlots := pods(renderScenario(t, c, base+"api: {slots: 2}\n"))["Deployment/wrench-api"]
		if containerByName(withSlots, "bootstrap") == nil || runsNoTask(withSlots) {
			t.Errorf("%s: API with slots has no engine", engine)
		}
	}
}

// TestChartQueueClaim: the all-in-one queue's store is on a claim the
// chart owns (kept by uninstall), mounted as a plain volume (never a
// volumeClaimTemplate, which no upgrade could change), at the data
// directory with dind and at <data dir>/nats with the node's engine, so
// both modes find the same store on it.
func TestChartQueueClaim(t *testing.T) {
	c := loadChart(t, chartDir(t))
	for _, sc := range []scenario{scenarios[0], scenarios[1]} {
		t.Run(sc.name, func(t *testing.T) {
			ms := renderScenario(t, c, sc.values)
			var pvc, sts map[string]any
			for _, m := range ms {
				switch m.kind() {
				case "PersistentVolumeClaim":
					pvc = m.obj
				case "StatefulSet":
					sts = m.obj
				}
			}
			if pvc == nil || sts == nil {
				t.Fatal("no claim or no StatefulSet")
			}
			if str(pvc, "metadata", "annotations", "helm.sh/resource-policy") != "keep" {
				t.Error("the claim is not kept by helm uninstall")
			}
			if get(sts, "spec", "volumeClaimTemplates") != nil {
				t.Error("the StatefulSet has a volumeClaimTemplate")
			}
			pod, _ := get(sts, "spec", "template", "spec").(map[string]any)
			claim := str(pvc, "metadata", "name")
			w := containerByName(pod, "wrench")
			dataDir, _ := envValue(w, "WRENCH_DATA_DIR")
			mounted := ""
			for _, v := range list(pod, "volumes") {
				if str(v, "persistentVolumeClaim", "claimName") != claim {
					continue
				}
				for _, m := range list(w, "volumeMounts") {
					if str(m, "name") == str(v, "name") {
						mounted = str(m, "mountPath")
						if p := str(m, "subPath"); p != "" {
							// The store is <data dir>/nats, on the claim's nats/.
							pod0 := strings.Replace(dataDir, "$(POD_NAME)", str(sts, "metadata", "name")+"-0", 1)
							if mounted != pod0+"/nats" || p != "nats" {
								t.Errorf("claim mounted at %s (subPath %s), data dir %s: want <data dir>/nats from nats/", mounted, p, pod0)
							}
						} else if mounted != dataDir {
							t.Errorf("claim mounted at %s, data dir %s", mounted, dataDir)
						}
					}
				}
			}
			if mounted == "" {
				t.Errorf("the wrench container does not mount the claim %s", claim)
			}
		})
	}
}
