package adjustguard

import (
	"regexp"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
)

// The created container of every request below, and another one the
// creation updates.
const (
	created = "ctr-created"
	other   = "ctr-other"
	plugin  = "90-cpumanager"
)

// request returns a validation request for the creation of container app
// of pod default/web, with the owners claim sets and the adjustment adj.
func request(adj *api.ContainerAdjustment, claim func(o *api.OwningPlugins)) *api.ValidateContainerAdjustmentRequest {
	o := api.NewOwningPlugins()
	if claim != nil {
		claim(o)
	}
	return &api.ValidateContainerAdjustmentRequest{
		Pod:       &api.PodSandbox{Id: "pod", Name: "web", Namespace: "default"},
		Container: &api.Container{Id: created, Name: "app"},
		Adjust:    adj,
		Owners:    o,
	}
}

// must fails the test on a claim NRI refuses (a conflict).
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule Rule
		req  func(t *testing.T) *api.ValidateContainerAdjustmentRequest
		// refused matches the error, "" for none; each of names must be
		// in it.
		refused string
		names   []string
	}{
		{"nothing adjusted", Rule{Plugin: "cpumanager"}, func(t *testing.T) *api.ValidateContainerAdjustmentRequest {
			return request(nil, nil)
		}, "", nil},
		{"what nri-cpumanager sets, here and in an update", Rule{Plugin: "cpumanager"}, func(t *testing.T) *api.ValidateContainerAdjustmentRequest {
			return request(nil, func(o *api.OwningPlugins) {
				for _, id := range []string{created, other} {
					must(t, o.ClaimCPUSetCPUs(id, plugin))
					must(t, o.ClaimCPUSetMems(id, plugin))
				}
				must(t, o.ClaimCPUShares(created, plugin))
				must(t, o.ClaimCPUQuota(created, plugin))
				must(t, o.ClaimCPUPeriod(created, plugin))
			})
		}, "", nil},
		{"an environment variable", Rule{Plugin: "cpumanager"}, func(t *testing.T) *api.ValidateContainerAdjustmentRequest {
			return request(nil, func(o *api.OwningPlugins) {
				must(t, o.ClaimCPUSetCPUs(created, plugin))
				must(t, o.ClaimEnv(created, "LD_PRELOAD", plugin))
			})
		}, `plugin "90-cpumanager" adjusted Env "LD_PRELOAD" of container app of pod default/web`, nil},
		{"a mount, a device, a CDI device, the arguments", Rule{Plugin: "cpumanager"}, func(t *testing.T) *api.ValidateContainerAdjustmentRequest {
			return request(nil, func(o *api.OwningPlugins) {
				must(t, o.ClaimMount(created, "/host", plugin))
				must(t, o.ClaimDevice(created, "/dev/mem", plugin))
				must(t, o.ClaimCdiDevice(created, "vendor.com/gpu=0", plugin))
				must(t, o.ClaimArgs(created, plugin))
			})
		}, `adjusted Mounts "/host"`, []string{`Devices "/dev/mem"`, `CdiDevices "vendor.com/gpu=0"`, "adjusted Args of container app"}},
		{"the memory limit of a container it updates", Rule{Plugin: "cpumanager"}, func(t *testing.T) *api.ValidateContainerAdjustmentRequest {
			return request(nil, func(o *api.OwningPlugins) {
				must(t, o.ClaimCPUSetCPUs(other, plugin))
				must(t, o.ClaimMemLimit(other, plugin))
			})
		}, `plugin "90-cpumanager" adjusted MemLimit of container ctr-other \(updated with this creation\)`, nil},
		{"under another index", Rule{Plugin: "cpumanager"}, func(t *testing.T) *api.ValidateContainerAdjustmentRequest {
			return request(nil, func(o *api.OwningPlugins) { must(t, o.ClaimEnv(created, "X", "10-cpumanager")) })
		}, `plugin "10-cpumanager" adjusted Env "X"`, nil},
		{"an OCI hook, with another plugin's", Rule{Plugin: "cpumanager"}, func(t *testing.T) *api.ValidateContainerAdjustmentRequest {
			return request(nil, func(o *api.OwningPlugins) {
				must(t, o.ClaimHooks(created, "40-hooks"))
				must(t, o.ClaimHooks(created, plugin))
			})
		}, `plugin "90-cpumanager" adjusted OciHooks`, nil},
		{"the removal of another plugin's mount", Rule{Plugin: "cpumanager"}, func(t *testing.T) *api.ValidateContainerAdjustmentRequest {
			return request(&api.ContainerAdjustment{Mounts: []*api.Mount{{Destination: api.MarkForRemoval("/data")}}}, func(o *api.OwningPlugins) {
				must(t, o.ClaimMount(created, "/data", "40-storage"))
				o.ClearMount(created, "/data", plugin)
			})
		}, `plugin "90-cpumanager" adjusted Mounts "/data"`, nil},
		{"another plugin's environment variable", Rule{Plugin: "cpumanager"}, func(t *testing.T) *api.ValidateContainerAdjustmentRequest {
			return request(nil, func(o *api.OwningPlugins) {
				must(t, o.ClaimEnv(created, "X", "40-other"))
				must(t, o.ClaimCPUSetCPUs(created, plugin))
			})
		}, "", nil},
		{"a plugin whose name ends like it", Rule{Plugin: "cpumanager"}, func(t *testing.T) *api.ValidateContainerAdjustmentRequest {
			return request(nil, func(o *api.OwningPlugins) { must(t, o.ClaimEnv(created, "X", "40-not-cpumanager")) })
		}, "", nil},
		{"another plugin's environment variable, every plugin bounded", Rule{Plugin: "cpumanager", AllPlugins: true}, func(t *testing.T) *api.ValidateContainerAdjustmentRequest {
			return request(nil, func(o *api.OwningPlugins) { must(t, o.ClaimEnv(created, "X", "40-other")) })
		}, `plugin "40-other" adjusted Env "X" .*; a plugin may adjust only`, nil},
		{"a removal NRI attributes to no plugin", Rule{Plugin: "cpumanager"}, func(t *testing.T) *api.ValidateContainerAdjustmentRequest {
			return request(&api.ContainerAdjustment{
				Annotations: map[string]string{api.MarkForRemoval("seccomp.security.alpha.kubernetes.io/pod"): ""},
				Env:         []*api.KeyValue{{Key: api.MarkForRemoval("HTTP_PROXY")}},
				Linux:       &api.LinuxContainerAdjustment{Sysctl: map[string]string{api.MarkForRemoval("net.core.somaxconn"): ""}},
			}, nil)
		}, `the adjustment removes Annotations "seccomp.security.alpha.kubernetes.io/pod" of container app of pod default/web, and NRI names no plugin for it`,
			[]string{`removes Env "HTTP_PROXY"`, `removes Sysctl "net.core.somaxconn"`}},
		{"a removal NRI attributes to no plugin, allowed", Rule{Plugin: "cpumanager", AllowUnattributedRemovals: true}, func(t *testing.T) *api.ValidateContainerAdjustmentRequest {
			return request(&api.ContainerAdjustment{Mounts: []*api.Mount{{Destination: api.MarkForRemoval("/data")}}}, nil)
		}, "", nil},
		{"a removal another plugin owns", Rule{Plugin: "cpumanager"}, func(t *testing.T) *api.ValidateContainerAdjustmentRequest {
			return request(&api.ContainerAdjustment{Env: []*api.KeyValue{{Key: api.MarkForRemoval("X")}}}, func(o *api.OwningPlugins) {
				must(t, o.ClaimEnv(created, "X", "30-a"))
				o.ClearEnv(created, "X", "40-b")
			})
		}, "", nil},
		{"no owners at all", Rule{Plugin: "cpumanager"}, func(t *testing.T) *api.ValidateContainerAdjustmentRequest {
			r := request(&api.ContainerAdjustment{}, nil)
			r.Owners = nil
			return r
		}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.rule.Check(tc.req(t))
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("let through, want a refusal matching %q", tc.refused)
			}
			if !regexp.MustCompile(tc.refused).MatchString(err.Error()) {
				t.Errorf("refusal %q does not match %q", err, tc.refused)
			}
			for _, n := range tc.names {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("refusal %q does not name %s", err, n)
				}
			}
			if !strings.Contains(err.Error(), "may adjust only CPUSetCPUs, CPUSetMems, CPUShares, CPUQuota and CPUPeriod") {
				t.Errorf("refusal %q does not say what is allowed", err)
			}
		})
	}
}

// TestCheckIsStable: a refusal names the fields in the same order every
// time (maps are read in sorted order), so repeated refusals of a pod read
// the same in the kubelet's events.
func TestCheckIsStable(t *testing.T) {
	req := request(nil, func(o *api.OwningPlugins) {
		for _, k := range []string{"A", "B", "C", "D", "E"} {
			must(t, o.ClaimEnv(created, k, plugin))
			must(t, o.ClaimEnv(other, k, plugin))
		}
		must(t, o.ClaimMemLimit(created, plugin))
		must(t, o.ClaimPidsLimit(created, plugin))
	})
	first := Rule{Plugin: "cpumanager"}.Check(req).Error()
	for range 20 {
		if got := (Rule{Plugin: "cpumanager"}).Check(req).Error(); got != first {
			t.Fatalf("refusals differ:\n%s\n%s", first, got)
		}
	}
}
