package deploytest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// kubeAPI is a real kube-apiserver (built by scripts/k8s-tools.sh) on a
// real etcd (Debian's etcd-server), with no controllers, kubelet or
// scheduler: objects are validated, admitted and stored, never run. It
// holds the namespace "tools" and the KEDA and Prometheus Operator CRDs of
// testdata/crds. One is started per test binary, on first use, and stopped
// by TestMain.
type kubeAPI struct {
	dir        string
	kubeconfig string
	kubectl    string
	procs      []*exec.Cmd
}

var (
	kubeOnce sync.Once
	kube     *kubeAPI
	kubeErr  error
)

// needKubeAPI returns the test's apiserver, starting it on first use.
func needKubeAPI(t *testing.T) *kubeAPI {
	t.Helper()
	tl := needTools(t)
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		msg := "no etcd on PATH (Debian: apt-get install etcd-server; make deps does it)"
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: " + msg)
		}
		t.Skip(msg)
	}
	kubeOnce.Do(func() {
		kube, kubeErr = startKubeAPI(tl, etcd, filepath.Join(repoRoot(t), "deploy", "deploytest", "testdata", "crds"))
	})
	if kubeErr != nil {
		t.Fatal(kubeErr)
	}
	return kube
}

// stopKubeAPI stops the apiserver and etcd (from TestMain).
func stopKubeAPI() {
	if kube != nil {
		kube.stop()
	}
}

func startKubeAPI(tl k8sTools, etcd, crds string) (k *kubeAPI, err error) {
	dir, err := os.MkdirTemp("", "wrench-kubeapi-")
	if err != nil {
		return nil, err
	}
	k = &kubeAPI{dir: dir, kubectl: tl.Kubectl}
	defer func() {
		if err != nil {
			k.stop()
		}
	}()
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	client, peer, secure := ports[0], ports[1], ports[2]
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	if err := k.start("etcd", etcd, "--data-dir", filepath.Join(dir, "etcd"), "--name", "deploytest",
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "deploytest="+peerURL); err != nil {
		return nil, err
	}
	// A service-account signing key, and a static token for kubectl.
	if out, err := exec.Command("openssl", "genrsa", "-out", filepath.Join(dir, "sa.key"), "2048").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("openssl genrsa: %v\n%s", err, out)
	}
	if out, err := exec.Command("openssl", "rsa", "-in", filepath.Join(dir, "sa.key"), "-pubout", "-out", filepath.Join(dir, "sa.pub")).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("openssl rsa: %v\n%s", err, out)
	}
	const token = "deploytest-admin-token"
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(token+",admin,admin,system:masters\n"), 0o600); err != nil {
		return nil, err
	}
	if err := k.start("kube-apiserver", tl.APIServer,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(secure),
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.96.0.0/24",
		// No controllers run: nothing reconciles the endpoints of the
		// kubernetes Service, whose 127.0.0.1 address it would refuse.
		"--endpoint-reconciler-type=none",
		// As in clusters that run Docker-in-Docker (kubeadm's default).
		"--allow-privileged=true",
	); err != nil {
		return nil, err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", secure)
	if err := waitHTTPS(server+"/readyz", token, 4*time.Minute, k); err != nil {
		return nil, err
	}
	k.kubeconfig = filepath.Join(dir, "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: deploytest
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: %q}
contexts:
- name: deploytest
  context: {cluster: deploytest, user: admin, namespace: tools}
current-context: deploytest
`, server, token)
	if err := os.WriteFile(k.kubeconfig, []byte(kc), 0o600); err != nil {
		return nil, err
	}
	// The namespace as docs/operations.md has operators make it.
	if out, err := k.kubectlRun("create", "namespace", "tools"); err != nil {
		return nil, fmt.Errorf("create namespace: %v\n%s", err, out)
	}
	if out, err := k.kubectlRun("label", "namespace", "tools", "pod-security.kubernetes.io/enforce=privileged"); err != nil {
		return nil, fmt.Errorf("label namespace: %v\n%s", err, out)
	}
	if out, err := k.kubectlRun("apply", "--server-side", "-f", crds); err != nil {
		return nil, fmt.Errorf("apply CRDs: %v\n%s", err, out)
	}
	if out, err := k.kubectlRun("wait", "--for=condition=established", "--timeout=120s", "crd", "--all"); err != nil {
		return nil, fmt.Errorf("CRDs not established: %v\n%s", err, out)
	}
	return k, nil
}

// start runs a process with its output in dir/<name>.log.
func (k *kubeAPI) start(name, bin string, args ...string) error {
	logf, err := os.Create(filepath.Join(k.dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	k.procs = append(k.procs, cmd)
	return nil
}

// stop ends the processes it started, newest first, and removes dir.
func (k *kubeAPI) stop() {
	for i := len(k.procs) - 1; i >= 0; i-- {
		p := k.procs[i]
		p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			p.Process.Kill()
			<-done
		}
	}
	os.RemoveAll(k.dir)
}

// logTail is the end of a process's log, for failure messages.
func (k *kubeAPI) logTail(name string) string {
	b, _ := os.ReadFile(filepath.Join(k.dir, name+".log"))
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// kubectlRun runs kubectl against the apiserver.
func (k *kubeAPI) kubectlRun(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.kubectl, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// helmRun runs helm against the apiserver.
func (k *kubeAPI) helmRun(helm string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helm, append(args, "--kubeconfig", k.kubeconfig, "--kube-context", "deploytest")...)
	cmd.Env = helmEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func waitHTTPS(url, token string, limit time.Duration, k *kubeAPI) error {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(limit)
	var last string
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		for _, p := range k.procs {
			if p.ProcessState != nil {
				return fmt.Errorf("%s exited", p.Path)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready after %s (%s):\n%s", limit, last, k.logTail("kube-apiserver"))
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	if len(ports) != n {
		return nil, errors.New("no free ports")
	}
	return ports, nil
}

// applyServerDryRun applies a multi-document YAML stream with
// `kubectl apply --dry-run=server` to namespace tools: the apiserver
// validates every object against its schema (and the CRDs'), runs
// admission, and stores nothing.
func (k *kubeAPI) applyServerDryRun(docs string) (string, error) {
	f, err := os.CreateTemp(k.dir, "render-*.yaml")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	f.WriteString(docs)
	f.Close()
	out, err := k.kubectlRun("apply", "--dry-run=server", "--validate=strict", "-n", "tools", "-f", f.Name())
	return strings.TrimSpace(out), err
}
