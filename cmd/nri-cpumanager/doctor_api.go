package main

import (
	"context"
	"fmt"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/kubeapi"
)

// apiTimeout bounds doctor's requests to the Kubernetes API.
const apiTimeout = 10 * time.Second

// checkTopology reports, when the plugin exports this node's
// NodeResourceTopology object, whether the object there is the plugin's:
// one another tool owns (node-feature-discovery's topology updater,
// nri-plugins) is left alone, and the plugin exports nothing. It reads the
// API as the plugin does (the pod's service account, or $KUBECONFIG) and
// says so when it cannot.
func (d *doctorRun) checkTopology() {
	if !d.cfg.KubernetesAPI || !d.cfg.NodeResourceTopology.Enabled {
		return
	}
	node := kubeapi.NodeName()
	rest, err := kubeapi.Config(buildInfo().Version)
	if err != nil {
		d.report(statusInfo, "topology", fmt.Sprintf("the owner of NodeResourceTopology %s is not checked: %v", node, err),
			"run doctor in the plugin's pod (its service account reads the object), or set KUBECONFIG")
		return
	}
	clients, err := kubeapi.NewClients(rest, node, true)
	if err != nil {
		d.report(statusInfo, "topology", fmt.Sprintf("the owner of NodeResourceTopology %s is not checked: %v", node, err), "")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	owner, found, err := kubeapi.ExportOwner(ctx, clients.Topology, node)
	switch {
	case err != nil:
		d.report(statusWarning, "topology", err.Error(),
			"run doctor in the plugin's pod (its service account reads the object); the CRD comes with components/noderesourcetopology-crd (the chart: installNodeResourceTopologyCRD), the topology role with components/noderesourcetopology (the chart: config.nodeResourceTopology.enabled)")
	case !found:
		d.report(statusInfo, "topology", fmt.Sprintf("no NodeResourceTopology %s yet: the plugin writes it once it runs on the node", node), "")
	case owner != "":
		d.report(statusWarning, "topology", fmt.Sprintf("NodeResourceTopology %s belongs to %s: the plugin leaves it alone and exports nothing (noderesourcetopology_foreign is 1)", node, owner),
			"run one exporter per node: stop the other tool's topology updater on this node, or set nodeResourceTopology.enabled: false in the plugin's configuration")
	default:
		d.report(statusOK, "topology", fmt.Sprintf("NodeResourceTopology %s is the plugin's (%s)", node, kubeapi.Component), "")
	}
}
