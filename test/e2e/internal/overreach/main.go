// Command overreach is an NRI plugin for the end-to-end suite that makes
// the adjustments nri-cpumanager never makes, one per pod, as a
// compromised or careless plugin on the node's NRI socket could: the pod
// annotation overreach.test/adjust names which (hook, namespace, sysctl,
// seccomp; env, mount). Containers of pods without it are left alone. The
// suite checks that containerd's default validator, as
// deploy/containerd-nri.toml configures it, refuses the first four, and
// that nri-cpumanager validate-adjustments refuses the others when
// overreach registers under the plugin's name (-name cpumanager).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

// annotation names the adjustment to make to a pod's containers.
const annotation = "overreach.test/adjust"

// adjustments are the adjustments overreach makes, by annotation value.
var adjustments = map[string]func(*api.ContainerAdjustment){
	"hook": func(a *api.ContainerAdjustment) {
		a.AddHooks(&api.Hooks{CreateRuntime: []*api.Hook{{Path: "/bin/true"}}})
	},
	"namespace": func(a *api.ContainerAdjustment) {
		a.AddOrReplaceNamespace(&api.LinuxNamespace{Type: "network", Path: "/proc/1/ns/net"})
	},
	"sysctl": func(a *api.ContainerAdjustment) {
		a.SetLinuxSysctl("net.ipv4.ip_unprivileged_port_start", "0")
	},
	"seccomp": func(a *api.ContainerAdjustment) {
		a.SetLinuxSeccompPolicy(&api.LinuxSeccomp{DefaultAction: "SCMP_ACT_ALLOW"})
	},
	// What the default validator lets any plugin do.
	"env": func(a *api.ContainerAdjustment) {
		a.AddEnv("OVERREACH", "1")
	},
	"mount": func(a *api.ContainerAdjustment) {
		a.AddMount(&api.Mount{Destination: "/overreach", Source: "/etc", Type: "bind", Options: []string{"rbind", "ro"}})
	},
}

// overreach implements the NRI handler it needs.
type overreach struct {
	log *log.Logger
}

// Synchronize says the plugin is registered.
func (o *overreach) Synchronize(_ context.Context, pods []*api.PodSandbox, _ []*api.Container) ([]*api.ContainerUpdate, error) {
	o.log.Printf("synchronized pods=%d", len(pods))
	return nil, nil
}

// CreateContainer makes the adjustment the pod's annotation names.
func (o *overreach) CreateContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	what := pod.GetAnnotations()[annotation]
	adjust, ok := adjustments[what]
	if !ok {
		return nil, nil, nil
	}
	a := &api.ContainerAdjustment{}
	adjust(a)
	o.log.Printf("create pod=%s container=%s adjust=%s", pod.GetName(), c.GetName(), what)
	return a, nil, nil
}

func main() {
	socket := flag.String("socket", "", "NRI socket to connect to")
	name := flag.String("name", "overreach", "`name` to register with NRI")
	index := flag.String("index", "40", "NRI plugin `index` to register with")
	flag.Parse()
	logger := log.New(os.Stderr, "overreach: ", log.LstdFlags|log.Lmicroseconds)
	if err := run(*socket, *name, *index, &overreach{log: logger}); err != nil {
		logger.Printf("exiting: %v", err)
		os.Exit(1)
	}
}

// run serves NRI until SIGTERM or until containerd goes away.
func run(socket, name, index string, o *overreach) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s, err := stub.New(o, stub.WithSocketPath(socket), stub.WithPluginName(name), stub.WithPluginIdx(index),
		stub.WithOnClose(func() { o.log.Printf("connection closed") }))
	if err != nil {
		return fmt.Errorf("create NRI stub: %w", err)
	}
	if err := s.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("serve NRI: %w", err)
	}
	return nil
}
