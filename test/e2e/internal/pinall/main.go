// Command pinall is a minimal NRI plugin for the harness's own end-to-end
// test. It pins every container created while it runs to one cpuset and
// logs every event it handles as one line, so that the test can check that
// a plugin started through the harness is wired to containerd and that its
// adjustments reach the cgroups the harness reads.
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

// pinAll implements the NRI handlers it needs.
type pinAll struct {
	cpus string
	log  *log.Logger
	stub stub.Stub
}

// Synchronize logs the state containerd delivers on connection, and the
// request timeout containerd configured.
func (p *pinAll) Synchronize(_ context.Context, pods []*api.PodSandbox, containers []*api.Container) ([]*api.ContainerUpdate, error) {
	p.log.Printf("synchronized pods=%d containers=%d request-timeout=%s", len(pods), len(containers), p.stub.RequestTimeout())
	return nil, nil
}

// CreateContainer pins the new container to the configured cpuset.
func (p *pinAll) CreateContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	adjust := &api.ContainerAdjustment{}
	adjust.SetLinuxCPUSetCPUs(p.cpus)
	p.log.Printf("create pod=%s container=%s cpus=%s", pod.GetName(), c.GetName(), p.cpus)
	return adjust, nil, nil
}

// UpdateContainer logs the requested resources and lets them through.
func (p *pinAll) UpdateContainer(_ context.Context, pod *api.PodSandbox, c *api.Container, r *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	p.log.Printf("update pod=%s container=%s quota=%d memory=%d",
		pod.GetName(), c.GetName(), r.GetCpu().GetQuota().GetValue(), r.GetMemory().GetLimit().GetValue())
	return nil, nil
}

// UpdatePodSandbox logs the new pod-level resources.
func (p *pinAll) UpdatePodSandbox(_ context.Context, pod *api.PodSandbox, _, r *api.LinuxResources) error {
	p.log.Printf("update-pod pod=%s quota=%d memory=%d", pod.GetName(), r.GetCpu().GetQuota().GetValue(), r.GetMemory().GetLimit().GetValue())
	return nil
}

func main() {
	socket := flag.String("socket", "", "NRI socket to connect to")
	cpus := flag.String("cpus", "0", "cpuset every new container is pinned to")
	flag.Parse()
	logger := log.New(os.Stderr, "pinall: ", log.LstdFlags|log.Lmicroseconds)
	if err := run(*socket, &pinAll{cpus: *cpus, log: logger}); err != nil {
		logger.Printf("exiting: %v", err)
		os.Exit(1)
	}
	logger.Printf("stopped")
}

// run serves NRI until SIGTERM or until containerd goes away.
func run(socket string, p *pinAll) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s, err := stub.New(p, stub.WithSocketPath(socket), stub.WithPluginName("pinall"), stub.WithPluginIdx("50"))
	if err != nil {
		return fmt.Errorf("create NRI stub: %w", err)
	}
	p.stub = s
	if err := s.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("serve NRI: %w", err)
	}
	return nil
}
