//go:build e2e

package e2e

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/e2etest"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// Two configuration groups the suite adds to deploy/'s ConfigMap: one
// whose key applies live, and a canary that only observes, a key applied
// at a restart.
const (
	liveGroup   = "e2e-live"
	canaryGroup = "e2e-canary"
)

// configGroups adds two group files to the ConfigMap and moves the node
// through them by its label nri-cpumanager.io/config-group, without a
// restart of the plugin: the live group's key is applied at once and
// config_group_info names the group; the canary's observeOnly waits for a
// restart (config_restart_pending is 1, the plugin still pins, the log
// says so); the label removed, the node is in no group and nothing waits.
func (k *kube) configGroups(ctx context.Context, t *testing.T) {
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	plugin := k.Attach(ctx, t, k.pluginPod(ctx, t), "nri-cpumanager")
	header := "apiVersion: " + config.APIVersion + "\nkind: " + config.Kind + "\n"
	files := map[string]any{
		config.GroupFile(liveGroup):   header + "scaleDownDelay: 1s\n",
		config.GroupFile(canaryGroup): header + "observeOnly: true\n",
	}
	k.Kubectl(ctx, t, "patch", "configmap", "nri-cpumanager-config", "-n", e2etest.PluginNamespace, "--type=merge", "-p", encodeJSON(t, map[string]any{"data": files}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := k.Cluster.Kubectl(ctx, "label", "node", k.Cluster.NodeName, config.GroupLabel+"-"); err != nil {
			t.Errorf("remove the group label: %v", err)
		}
		gone := map[string]any{}
		for name := range files {
			gone[name] = nil
		}
		if _, err := k.Cluster.Kubectl(ctx, "patch", "configmap", "nri-cpumanager-config", "-n", e2etest.PluginNamespace, "--type=merge", "-p", encodeJSON(t, map[string]any{"data": gone})); err != nil {
			t.Errorf("remove the group files: %v", err)
		}
	})

	// moveTo labels the node with group ("" removes the label) and waits
	// for the plugin to run it, returning the log mark of the move.
	moveTo := func(group string) int64 {
		t.Helper()
		mark := k.logSize(ctx, t, plugin)
		moved := time.Now()
		label, to := config.GroupLabel+"="+group, regexp.QuoteMeta(group)
		if group == "" {
			label, to = config.GroupLabel+"-", `"?\(none\)"?`
		}
		k.Kubectl(ctx, t, "label", "--overwrite", "node", k.Cluster.NodeName, label)
		if _, err := k.waitLog(ctx, plugin, mark, regexp.MustCompile(`the node's configuration group changed.* to=`+to+`(\s|$)`)); err != nil {
			t.Fatalf("the plugin did not move to group %q: %v", group, err)
		}
		t.Logf("label %s: the plugin ran it %v later", label, time.Since(moved).Round(100*time.Millisecond))
		name := group
		if name == "" {
			name = "(none)"
		}
		k.wantMetric(ctx, t, `nri_cpumanager_config_group_info{group="`+name+`",source="label"}`, 1)
		return mark
	}

	mark := moveTo(liveGroup)
	if _, err := k.waitLog(ctx, plugin, mark, regexp.MustCompile(`configuration file changed.*scaleDownDelay`)); err != nil {
		t.Errorf("group %s's key was not applied: %v", liveGroup, err)
	}
	k.wantMetric(ctx, t, "nri_cpumanager_config_restart_pending", 0)

	mark = moveTo(canaryGroup)
	if _, err := k.waitLog(ctx, plugin, mark, regexp.MustCompile(`take effect only when the plugin restarts.*observeOnly`)); err != nil {
		t.Errorf("the plugin did not say observeOnly waits for a restart: %v", err)
	}
	k.wantMetric(ctx, t, "nri_cpumanager_config_restart_pending", 1)
	k.wantMetric(ctx, t, "nri_cpumanager_observe_only", 0) // until a restart, the node still pins

	mark = moveTo("")
	if _, err := k.waitLog(ctx, plugin, mark, regexp.MustCompile(`no configuration key waits for a restart any more`)); err != nil {
		t.Errorf("the plugin did not say nothing waits for a restart: %v", err)
	}
	k.wantMetric(ctx, t, "nri_cpumanager_config_restart_pending", 0)
}

// wantMetric waits for one sample of the plugin's metrics to be want
// (the plugin sets its gauges just after the log line a test waits for).
func (k *kube) wantMetric(ctx context.Context, t *testing.T, series string, want float64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var v float64
	var err error
	if harness.Poll(ctx, func() (bool, error) {
		v, err = e2etest.PluginMetricValue(ctx, series)
		return err == nil && v == want, nil
	}) != nil {
		t.Errorf("%s = %v (%v), want %v", series, v, err, want)
	}
}
