package plugin

import (
	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/devices"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// maxLocatedDevices bounds the device nodes whose locality is looked up
// for one container. A privileged container is given every device of the
// host, none of them its own: their NUMA nodes are no hint (the kubelet's
// topology manager knows only the device plugins' devices), and looking
// them up would cost a sysfs walk each.
const maxLocatedDevices = 64

// withDeviceNodes returns c with the NUMA nodes of its devices, looked up
// in sysfs once, when the container is created or first seen (the policy
// keeps them): only for a container that may be pinned, under a topology
// manager policy that aligns (not none).
func (p *Plugin) withDeviceNodes(c policy.Container, ctr *api.Container) policy.Container {
	nriDevices := ctr.GetLinux().GetDevices()
	if len(nriDevices) == 0 || !p.policy.AlignsDevices() || !policy.Classify(c.Pod.QoS(), c.Resources).Exclusive {
		return c
	}
	log := p.containerLog(c)
	if len(nriDevices) > maxLocatedDevices {
		log.WithField("devices", len(nriDevices)).Debug("too many device nodes (a privileged container?): no device NUMA hint")
		return c
	}
	devs := make([]devices.Device, 0, len(nriDevices))
	for _, d := range nriDevices {
		devs = append(devs, devices.Device{Path: bounded(d.GetPath(), maxPathLen), Type: d.GetType(), Major: d.GetMajor(), Minor: d.GetMinor()})
	}
	loc, err := devices.Locate(p.opts.SysfsRoot, devs)
	if err != nil {
		log.WithError(err).Warn("cannot look up where the container's devices are: no device NUMA hint")
		return c
	}
	if err := loc.Err(); err != nil {
		log.WithError(err).Warn("some of the container's devices could not be located in sysfs: they give no NUMA hint")
	}
	if p.debugging() {
		for _, d := range loc.Devices {
			log.WithField("device", d.String()).Debug("device locality")
		}
	}
	if loc.Nodes != 0 {
		log.WithFields(logrus.Fields{"deviceNodes": loc.Nodes.String()}).Info("the container's devices are on these NUMA nodes: its CPUs follow them (topologyManagerPolicy)")
	}
	c.DeviceNodes = loc.Nodes
	return c
}
