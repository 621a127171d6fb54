package deploy

import (
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// TestChartProbesOverHTTP: with config.probeSocket "" the chart's probes
// ask healthAddress over HTTP, at the pod's address (checkEndpoints checks
// their shape), and the chart refuses a loopback healthAddress then, by
// the plugin's own rule (config.IsLoopback): the kubelet would restart a
// healthy plugin for ever. With the probe socket, the exec probes do not
// use healthAddress, and any address renders.
func TestChartProbesOverHTTP(t *testing.T) {
	ch := loadChart(t)
	p := renderPlugin(t, ch, map[string]any{"probeSocket": "", "healthAddress": ":9103"})
	if p.ctr.LivenessProbe == nil || p.ctr.LivenessProbe.HTTPGet == nil {
		t.Fatalf("probeSocket \"\" and healthAddress :9103: liveness probe %+v, want an HTTP probe", p.ctr.LivenessProbe)
	}

	for _, address := range []string{
		"127.0.0.1:9103", "127.1.2.3:9103", "[::1]:9103", "[0:0:0:0:0:0:0:1]:9103", "[::ffff:127.0.0.1]:9103",
		"[::ffff:7f00:1]:9103", "localhost:9103", "LocalHost:9103",
		":9103", "0.0.0.0:9103", "[::]:9103", "10.1.2.3:9103", "[fe80::1]:9103", "[::ffff:10.0.0.1]:9103", "[::1:0]:9103", "node-a:9103",
	} {
		t.Run(address, func(t *testing.T) {
			loopback := config.IsLoopback(address)
			_, err := renderChart(ch, releaseName, map[string]any{"config": map[string]any{"probeSocket": "", "healthAddress": address}})
			switch {
			case loopback && err == nil:
				t.Errorf("healthAddress %q is loopback and the probes ask it, yet the chart renders", address)
			case loopback && !strings.Contains(err.Error(), "config.healthAddress") || loopback && !strings.Contains(err.Error(), "is a loopback address, and the probes ask it"):
				t.Errorf("healthAddress %q: the refusal does not say why:\n%v", address, err)
			case !loopback && err != nil:
				t.Errorf("healthAddress %q is not loopback, yet the chart refuses it: %v", address, err)
			}
			if err != nil {
				t.Logf("refused: %v", err)
			}
			// The exec probes ask the probe socket: healthAddress is the
			// operator's, whatever it is.
			renderPlugin(t, ch, map[string]any{"healthAddress": address})
		})
	}
}
