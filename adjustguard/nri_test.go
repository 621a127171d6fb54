package adjustguard

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/sirupsen/logrus"
)

// adjuster is a plugin that makes, for each container, the adjustment and
// updates its name is given in adjust.
type adjuster struct {
	adjust  map[string]func() (*api.ContainerAdjustment, []*api.ContainerUpdate)
	synced  chan struct{}
	started bool
}

func (a *adjuster) Synchronize(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error) {
	if !a.started {
		a.started = true
		close(a.synced)
	}
	return nil, nil
}

func (a *adjuster) CreateContainer(_ context.Context, _ *api.PodSandbox, c *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	if f, ok := a.adjust[c.GetName()]; ok {
		adj, upd := f()
		return adj, upd, nil
	}
	return nil, nil, nil
}

// startRuntime starts an in-process NRI runtime (the NRI adaptation
// containerd embeds, of this module's NRI version) on a socket in a
// directory of its own, and returns it and the socket.
func startRuntime(t *testing.T) (*adaptation.Adaptation, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "adjustguard") // short: a socket's path has 108 bytes at most
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "nri.sock")
	r, err := adaptation.New("test-runtime", "1.0",
		func(ctx context.Context, cb adaptation.SyncCB) error {
			_, err := cb(ctx, nil, nil)
			return err
		},
		func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil },
		adaptation.WithSocketPath(socket),
		adaptation.WithPluginPath(filepath.Join(dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(dir, "conf.d")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r, socket
}

// startPlugin connects a plugin as index-name.
func startPlugin(ctx context.Context, t *testing.T, socket, name, index string, p *adjuster) {
	t.Helper()
	p.synced = make(chan struct{})
	s, err := stub.New(p, stub.WithSocketPath(socket), stub.WithPluginName(name), stub.WithPluginIdx(index))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Run(ctx) }()
	select {
	case <-p.synced:
	case <-time.After(10 * time.Second):
		t.Fatalf("plugin %s-%s did not synchronize", index, name)
	}
}

// create asks the runtime r to create container name, as containerd does.
func create(ctx context.Context, r *adaptation.Adaptation, name string) error {
	_, err := r.CreateContainer(ctx, &api.CreateContainerRequest{
		Pod: &api.PodSandbox{Id: "pod-1", Name: "web", Namespace: "default", Linux: &api.LinuxPodSandbox{}},
		Container: &api.Container{Id: "id-" + name, PodSandboxId: "pod-1", Name: name,
			Mounts: []*api.Mount{{Destination: "/data", Source: "/srv/data", Type: "bind", Options: []string{"rbind", "ro"}}},
			Linux:  &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{}, Memory: &api.LinuxMemory{}}}},
	})
	return err
}

// TestValidatorOnNRI runs the validating plugin on the NRI runtime with
// two plugins that adjust containers, cpumanager (90) and another (40):
// what nri-cpumanager sets passes, anything else cpumanager adjusts, and
// a removal of the container's own mount, has the creation refused
// with the validator's reason naming it; the other plugin's adjustments
// are not this validator's to judge. The owners are the ones NRI's own
// adaptation records, as containerd's does.
func TestValidatorOnNRI(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, socket := startRuntime(t)
	cpus := func() (*api.ContainerAdjustment, []*api.ContainerUpdate) {
		adj := &api.ContainerAdjustment{}
		adj.SetLinuxCPUSetCPUs("2-3")
		adj.SetLinuxCPUSetMems("0")
		u := &api.ContainerUpdate{ContainerId: "id-neighbour"}
		u.SetLinuxCPUSetCPUs("0-1")
		return adj, []*api.ContainerUpdate{u}
	}
	with := func(f func(*api.ContainerAdjustment)) func() (*api.ContainerAdjustment, []*api.ContainerUpdate) {
		return func() (*api.ContainerAdjustment, []*api.ContainerUpdate) {
			adj, upd := cpus()
			f(adj)
			return adj, upd
		}
	}
	cpumanager := &adjuster{adjust: map[string]func() (*api.ContainerAdjustment, []*api.ContainerUpdate){
		"pinned": cpus,
		"quota": with(func(a *api.ContainerAdjustment) {
			a.SetLinuxCPUShares(2048)
			a.SetLinuxCPUQuota(200000)
			a.SetLinuxCPUPeriod(100000)
		}),
		"env": with(func(a *api.ContainerAdjustment) { a.AddEnv("LD_PRELOAD", "/tmp/x.so") }),
		"mount": with(func(a *api.ContainerAdjustment) {
			a.AddMount(&api.Mount{Destination: "/host", Source: "/", Type: "bind"})
		}),
		"memory": func() (*api.ContainerAdjustment, []*api.ContainerUpdate) {
			adj, upd := cpus()
			upd[0].SetLinuxMemoryLimit(1 << 20)
			return adj, upd
		},
		"unmount": with(func(a *api.ContainerAdjustment) { a.RemoveMount("/data") }),
	}}
	another := &adjuster{adjust: map[string]func() (*api.ContainerAdjustment, []*api.ContainerUpdate){
		"other-env": func() (*api.ContainerAdjustment, []*api.ContainerUpdate) {
			adj := &api.ContainerAdjustment{}
			adj.AddEnv("OTHER", "1")
			return adj, nil
		},
	}}
	startPlugin(ctx, t, socket, "cpumanager", "90", cpumanager)
	startPlugin(ctx, t, socket, "other", "40", another)

	log := logrus.New()
	log.SetOutput(io.Discard)
	go func() {
		err := Run(ctx, Options{Rule: Rule{Plugin: "cpumanager"}, Socket: socket, Name: "cpumanager-validator", Index: "99", Log: logrus.NewEntry(log)})
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	// The validator is consulted once registered and synchronized.
	deadline := time.Now().Add(10 * time.Second)
	for create(ctx, r, "env") == nil {
		if time.Now().After(deadline) {
			t.Fatal("the validator never refused cpumanager's environment variable")
		}
		time.Sleep(20 * time.Millisecond)
	}

	for _, tc := range []struct {
		container string
		// refused is what the error must say, "" for a creation that
		// passes.
		refused []string
	}{
		{"pinned", nil},
		{"quota", nil},
		{"other-env", nil},
		{"env", []string{`validator "99-cpumanager-validator" rejected container adjustment`, `plugin "90-cpumanager" adjusted Env "LD_PRELOAD" of container env of pod default/web`}},
		{"mount", []string{`plugin "90-cpumanager" adjusted Mounts "/host"`}},
		{"memory", []string{`plugin "90-cpumanager" adjusted MemLimit of container id-neighbour (updated with this creation)`}},
		{"unmount", []string{`the adjustment removes Mounts "/data" of container unmount of pod default/web, and NRI names no plugin for it`}},
	} {
		err := create(ctx, r, tc.container)
		switch {
		case tc.refused == nil && err != nil:
			t.Errorf("%s: refused: %v", tc.container, err)
		case tc.refused != nil && err == nil:
			t.Errorf("%s: created, want it refused", tc.container)
		case err != nil:
			for _, want := range tc.refused {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: refusal %q does not say %q", tc.container, err, want)
				}
			}
		}
	}
}
