// Package adjustguard is a validating NRI plugin (nri-cpumanager
// validate-adjustments): containerd asks it about every container creation
// after the other plugins have adjusted it, with the plugin that made each
// change (NRI's owners), and it refuses the creation when nri-cpumanager's
// plugin changed anything but what nri-cpumanager sets — a cpuset's CPUs
// and memory nodes, and CPU shares, quota and period — naming what.
//
// containerd's built-in default validator refuses only OCI hooks,
// namespaces, sysctls and seccomp changes, from any plugin; mounts,
// devices, CDI devices, the environment, the arguments, rlimits, memory
// limits and the rest stay open to every plugin. This one closes them for
// the plugin it watches. It sits beside plugin/ as the project's second
// NRI adapter: it imports NRI and nothing of the plugin, so the rule does
// not depend on the code it checks.
package adjustguard

import (
	"fmt"
	"slices"
	"strings"

	"github.com/containerd/nri/pkg/api"
)

// Allowed are the fields nri-cpumanager adjusts, as NRI names them: the
// cpuset's CPUs and memory nodes of a created container and of the
// containers it updates with it (plugin/convert.go: adjustmentFor,
// updatesToNRI), and the CPU shares, quota and period that belong to a
// container's CPU placement.
var Allowed = []api.Field{
	api.Field_CPUSetCPUs,
	api.Field_CPUSetMems,
	api.Field_CPUShares,
	api.Field_CPUQuota,
	api.Field_CPUPeriod,
}

// Rule says whose adjustments are bounded to Allowed.
type Rule struct {
	// Plugin is the name the watched plugin registers with NRI
	// (pluginName, "cpumanager"), whatever its index: a plugin picks both
	// when it connects.
	Plugin string
	// AllPlugins bounds every plugin's adjustments, not only Plugin's: for
	// nodes where nri-cpumanager is the only NRI plugin. Then a process
	// that connects under another name is bounded too.
	AllPlugins bool
	// AllowUnattributedRemovals lets through removals NRI records no
	// owner for (see Check). By default they are refused: they may be the
	// watched plugin's.
	AllowUnattributedRemovals bool
}

// Check returns nil when the adjustments and updates of req keep to the
// rule, else an error naming every field the bounded plugins changed
// beyond Allowed, with its key (the variable, the mount's destination…)
// and the container.
//
// NRI (v0.12, containerd 2.4's) records no owner for a removal of
// something the container came with (an annotation, a mount, a sysctl):
// such a removal may be any plugin's, the watched one's included, so
// Check refuses it too unless AllowUnattributedRemovals. (NRI drops a
// removal of the container's own environment variable or device before
// the runtime sees it; Check would refuse those too.)
func (r Rule) Check(req *api.ValidateContainerAdjustmentRequest) error {
	var found []string
	owners := req.GetOwners().GetOwners()
	for _, id := range sortedKeys(owners) {
		fo := owners[id]
		what := r.container(req, id)
		for _, field := range sortedKeys(fo.GetSimple()) {
			if owner, ok := r.bounded(fo.GetSimple()[field]); ok && !slices.Contains(Allowed, api.Field(field)) {
				found = append(found, fmt.Sprintf("plugin %q adjusted %s of %s", owner, api.Field(field), what))
			}
		}
		for _, field := range sortedKeys(fo.GetCompound()) {
			keys := fo.GetCompound()[field].GetOwners()
			for _, key := range sortedKeys(keys) {
				if owner, ok := r.bounded(keys[key]); ok {
					found = append(found, fmt.Sprintf("plugin %q adjusted %s %q of %s", owner, api.Field(field), key, what))
				}
			}
		}
	}
	if !r.AllowUnattributedRemovals {
		for _, rm := range unattributedRemovals(req) {
			found = append(found, fmt.Sprintf("the adjustment removes %s %q of %s, and NRI names no plugin for it", rm.field, rm.key, r.container(req, req.GetContainer().GetId())))
		}
	}
	if len(found) == 0 {
		return nil
	}
	whose := fmt.Sprintf("plugin %q", r.Plugin)
	if r.AllPlugins {
		whose = "a plugin"
	}
	return fmt.Errorf("%s; %s may adjust only %s (nri-cpumanager validate-adjustments)", strings.Join(found, "; "), whose, allowedText())
}

// allowedText lists Allowed as NRI names the fields.
func allowedText() string {
	names := make([]string, len(Allowed))
	for i, f := range Allowed {
		names[i] = f.String()
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// bounded reports whether an owner record names a plugin the rule bounds,
// and which. A record is "<index>-<name>", "-<index>-<name>" for a removal
// of what another plugin had set, or several names joined by commas (OCI
// hooks, which plugins add to).
func (r Rule) bounded(record string) (string, bool) {
	for _, owner := range strings.Split(record, ",") {
		owner, _ = api.IsMarkedForRemoval(owner)
		if r.AllPlugins {
			return owner, owner != ""
		}
		if _, name, ok := strings.Cut(owner, "-"); ok && name == r.Plugin {
			return owner, true
		}
	}
	return "", false
}

// container names a container of req: the created one by its pod and
// name, another (one the creation updates) by its ID.
func (r Rule) container(req *api.ValidateContainerAdjustmentRequest, id string) string {
	if c := req.GetContainer(); c.GetId() == id {
		return fmt.Sprintf("container %s of pod %s/%s", c.GetName(), req.GetPod().GetNamespace(), req.GetPod().GetName())
	}
	return fmt.Sprintf("container %s (updated with this creation)", id)
}

// removal is a removal in a creation's adjustment.
type removal struct {
	field api.Field
	key   string
}

// unattributedRemovals returns the removals in req's adjustment of the
// created container that no owner record covers.
func unattributedRemovals(req *api.ValidateContainerAdjustmentRequest) []removal {
	adj := req.GetAdjust()
	if adj == nil {
		return nil
	}
	owned := func(field api.Field, key string) bool {
		compound := req.GetOwners().GetOwners()[req.GetContainer().GetId()].GetCompound()[int32(field)]
		_, ok := compound.GetOwners()[key]
		return ok
	}
	var out []removal
	check := func(field api.Field, key string, marked bool) {
		if marked && !owned(field, key) {
			out = append(out, removal{field, key})
		}
	}
	for _, k := range sortedKeys(adj.GetAnnotations()) {
		key, marked := api.IsMarkedForRemoval(k)
		check(api.Field_Annotations, key, marked)
	}
	for _, m := range adj.GetMounts() {
		key, marked := m.IsMarkedForRemoval()
		check(api.Field_Mounts, key, marked)
	}
	for _, e := range adj.GetEnv() {
		key, marked := e.IsMarkedForRemoval()
		check(api.Field_Env, key, marked)
	}
	for _, d := range adj.GetLinux().GetDevices() {
		key, marked := d.IsMarkedForRemoval()
		check(api.Field_Devices, key, marked)
	}
	for _, k := range sortedKeys(adj.GetLinux().GetSysctl()) {
		key, marked := api.IsMarkedForRemoval(k)
		check(api.Field_Sysctl, key, marked)
	}
	return out
}

// sortedKeys returns the keys of m in order: messages and refusals name
// the fields in the same order every time.
func sortedKeys[K interface{ ~int32 | ~string }, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
