package e2etest

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/nri-cpumanager/nri-cpumanager/cmd/nri-cpumanager/assemble"
	"github.com/nri-cpumanager/nri-cpumanager/kubeapi"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// TestAPIPodsAreTheScenariosSpecs plays every scenario of test/scenarios
// that declares pods' specs against the policy on its topology, the
// pods the CRI driver adds to the fake API server (apiPods) added to one
// before each sandbox: the plugin's own Kubernetes client (kubeapi, on
// client-go, from the server's kubeconfig) must read each pod a pod step
// declares as the scenario runner gives it to the fixture suites' drivers
// — its containers in order, their roles and exclusive CPUs, the pod's
// guaranteed CPUs — and every step must hold as written.
func TestAPIPodsAreTheScenariosSpecs(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "..", "scenarios", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scenario files (%v)", err)
	}
	played := 0
	for _, path := range paths {
		f, err := scenario.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if !f.NeedsPodSpec() {
			continue
		}
		played++
		t.Run(filepath.Base(path), func(t *testing.T) {
			pol, err := assemble.ScenarioPolicy(f, f.Topology, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			d := &apiCheckDriver{PolicyDriver: scenario.NewPolicyDriver(pol), t: t, api: startAPI(t), added: map[string]bool{}}
			if d.pods, err = apiPods(f, scenarioNode); err != nil {
				t.Fatal(err)
			}
			if err := scenario.NewRunner(d).Run(f); err != nil {
				t.Fatal(err)
			}
			if d.checked == 0 {
				t.Errorf("no pod step's pod was checked")
			}
			if un := d.api.server.Unserved(); len(un) > 0 {
				t.Errorf("requests the fake does not serve: %v", un)
			}
		})
	}
	if played == 0 {
		t.Fatal("no scenario declares pods' specs")
	}
}

// watchedAPI is a fake API server and the plugin's client of it.
type watchedAPI struct {
	server *harness.FakeAPIServer
	client *kubeapi.API
}

// startAPI starts a fake API server and the plugin's client of it, from
// the server's kubeconfig, and waits until the client watches its pods.
func startAPI(t *testing.T) *watchedAPI {
	t.Helper()
	s, err := harness.StartFakeAPIServer(t.TempDir(), scenarioNode, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	t.Setenv("KUBECONFIG", s.Kubeconfig)
	cfg, err := kubeapi.Config("test")
	if err != nil {
		t.Fatal(err)
	}
	clients, err := kubeapi.NewClients(cfg, scenarioNode, false)
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	api, err := kubeapi.New(kubeapi.Options{NodeName: scenarioNode, Clients: clients, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = api.Run(ctx, nil)
	}()
	t.Cleanup(func() { cancel(); <-done })
	// The server knows what it sent, not what the client made of it: a
	// pod of its own, once the client reads it, says the client's cache is
	// synced (PodInfo waits for no pod before).
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	sentinel, err := specPod("sentinel", "", nil, nil, scenarioNode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddPod(sentinel); err != nil {
		t.Fatal(err)
	}
	if err := harness.Poll(wctx, func() (bool, error) {
		_, ok := api.PodInfo(string(sentinel.UID), 0)
		return ok, nil
	}); err != nil {
		t.Fatalf("the plugin's client never read the pods of the fake API server: %v", err)
	}
	rv, err := s.DeletePod(sentinel.Namespace, sentinel.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitDelivered(wctx, rv); err != nil {
		t.Fatal(err)
	}
	return &watchedAPI{server: s, client: api}
}

// apiCheckDriver is the policy's driver with the pods of a scenario in a
// fake API server, read back through the plugin's client.
type apiCheckDriver struct {
	*scenario.PolicyDriver
	t       *testing.T
	api     *watchedAPI
	pods    []*corev1.Pod
	ran     int
	checked int
	added   map[string]bool // by pod UID
}

// RunPod adds the sandbox's pod to the API, as the CRI driver does, and
// checks what the plugin's client reads of it.
func (d *apiCheckDriver) RunPod(pod policy.Pod) error {
	ap := d.pods[d.ran]
	d.ran++
	if ap != nil {
		rv, err := d.api.server.AddPod(ap)
		if err != nil {
			return err
		}
		d.added[pod.UID] = true
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := d.api.server.WaitDelivered(ctx, rv); err != nil {
			return err
		}
		info, ok := d.api.client.PodInfo(pod.UID, 5*time.Second)
		if !ok {
			d.t.Errorf("pod %s: the plugin's client does not know it", pod.Name)
		} else if pod.Containers != nil {
			want := policy.PodInfo{Roles: pod.Roles, GuaranteedCPUs: pod.GuaranteedCPUs, Containers: pod.Containers}
			if !reflect.DeepEqual(info, want) {
				d.t.Errorf("pod %s: the plugin reads from the API\n%+v\nthe scenario declares\n%+v", pod.Name, info, want)
			}
			d.checked++
		}
	} else if pod.Containers != nil {
		d.t.Errorf("pod %s: the scenario declares its spec, and no pod is added to the API", pod.Name)
	}
	return d.PolicyDriver.RunPod(pod)
}

// RemovePod removes the pod from the API too.
func (d *apiCheckDriver) RemovePod(pod policy.Pod) error {
	if err := d.PolicyDriver.RemovePod(pod); err != nil {
		return err
	}
	if !d.added[pod.UID] {
		return nil
	}
	delete(d.added, pod.UID)
	_, err := d.api.server.DeletePod(pod.Namespace, pod.Name)
	return err
}

// TestAPIPodsOfCreations: a pod that runs at its first creation is in the
// API only when a creation names a container's role, with every container
// its creations name (app by default) and their first creation's CPU; a
// pod removed and created again is a new sandbox.
func TestAPIPodsOfCreations(t *testing.T) {
	f, err := scenario.Parse([]byte(`
name: roles at creations
topology: {sockets: 1, coresPerNUMA: 4, threadsPerCore: 1}
steps:
- create: {pod: plain, container: c, cpu: "1"}
- create: {pod: gu, container: init, role: init, cpu: "2"}
- create: {pod: gu, container: side, role: sidecar, cpu: "500m"}
- create: {pod: gu, container: app, cpu: "1"}
- restart: {pod: gu, container: app, cpu: "2"}
- create: {pod: gu, container: app, cpu: "3"}
- pod: {name: spec, qos: burstable, containers: [{name: a, cpu: "250m"}]}
- removePod: gu
- create: {pod: gu, container: app, cpu: "1"}
`))
	if err != nil {
		t.Fatal(err)
	}
	pods, err := apiPods(f, "n")
	if err != nil {
		t.Fatal(err)
	}
	describe := func(p *corev1.Pod) string {
		if p == nil {
			return "none"
		}
		var parts []string
		list := func(kind string, cs []corev1.Container) {
			for _, c := range cs {
				what := kind
				if c.RestartPolicy != nil {
					what = "sidecar"
				}
				parts = append(parts, fmt.Sprintf("%s:%s=%s/%s", what, c.Name, c.Resources.Requests.Cpu(), c.Resources.Limits.Cpu()))
			}
		}
		list("init", p.Spec.InitContainers)
		list("app", p.Spec.Containers)
		return fmt.Sprintf("%s %s %s on %s: %s", p.Name, p.UID, p.Status.QOSClass, p.Spec.NodeName, strings.Join(parts, " "))
	}
	var got []string
	for _, p := range pods {
		got = append(got, describe(p))
	}
	want := []string{
		"none",
		"gu gu-uid Guaranteed on n: init:init=2/2 sidecar:side=500m/500m app:app=1/1",
		"spec spec-uid Burstable on n: app:a=250m/0",
		"none",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the API's pods\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
