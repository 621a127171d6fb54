package lifecycle

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	kubelifecycle "k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/plugin"
)

// refusalText finds the verdict and reason in a refusal's text.
var refusalText = regexp.MustCompile(`(Deferred|Infeasible): ([A-Za-z]+)`)

// parseRefusal returns a refusal's verdict and reason ("" when the text
// has none).
func parseRefusal(err error) (verdict, reason string) {
	m := refusalText.FindStringSubmatch(err.Error())
	if m == nil {
		return "", ""
	}
	return m[1], m[2]
}

// pluginReason is the plugin's reason for the kubelet's admission
// failure: the topology manager's and the SMT alignment's are the same
// words; a failed allocation (UnexpectedAdmissionError, "not enough
// cpus") is the plugin's allocateCPUsError.
func pluginReason(kubeletReason string) string {
	switch kubeletReason {
	case "TopologyAffinityError", "SMTAlignmentError":
		return kubeletReason
	}
	return "allocateCPUsError"
}

// judgeRefusal judges the plugin's refusal of container name's creation
// (the kubelet admitted its pod): a re-creation is never refused; a first
// creation is refused only when the kubelet's own code refuses it on the
// plugin's free CPUs (with the API: the whole pod, which the plugin
// admits at once; without it: the container, with its pod's containers
// created so far), with the same reason (with the API), and only when a
// rule explains why the plugin has fewer free CPUs than the kubelet
// (explainRefusal). The kubelet tries the creation again at its next
// sync.
func (o *Oracle) judgeRefusal(p *pod, name string, again bool, err error) error {
	verdict, reason := parseRefusal(err)
	o.Counts.Add(fmt.Sprintf("creations refused (%s: %s)", verdict, reason), 1)
	if again && p.ctrs[name].absorbed {
		return failf("re-creation of %s/%s refused (a re-creation is never refused): %v", p.spec.Name, name, err)
	}
	if reason == "" {
		return failf("creation of %s/%s failed: %v", p.spec.Name, name, err)
	}
	snap := o.node.Settle()
	scope := name
	if o.api() {
		scope = ""
	}
	why, jerr := o.judgeOnPlugin(p, scope, snap)
	if jerr != nil {
		return jerr
	}
	if why == "" {
		return failf("creation of %s/%s refused (%v); the kubelet's code admits it on the plugin's free CPUs %s", p.spec.Name, name, err, snap.SharedPool)
	}
	if want := pluginReason(why); want != reason {
		if o.api() {
			return failf("creation of %s/%s refused with %s (%v); the kubelet's code refuses it on the plugin's free CPUs with %s", p.spec.Name, name, reason, err, why)
		}
		o.Counts.Add("no spec: a refusal's reason other than the kubelet's", 1)
	}
	return o.explainRefusal(p, name, "creation of "+p.spec.Name+"/"+name, why)
}

// explainRefusal names the rule that explains why the plugin has fewer
// free CPUs than the kubelet had when it admitted p: CPUs it keeps for an
// ended pod (orphan) or holds for a resize in flight (hold), without the
// API its per-container decisions (no spec), or the CPUs the kubelet
// admitted another pod on that the plugin refused earlier for one of
// these (refused pod waits). Without any, the refusal fails.
func (o *Oracle) explainRefusal(p *pod, name, what, why string) error {
	var rules []string
	for _, cpus := range o.orphans {
		if !cpus.IsEmpty() {
			rules = append(rules, RuleOrphan)
			break
		}
	}
	if len(o.holds) > 0 {
		rules = append(rules, RuleHold)
	}
	if !o.api() {
		rules = append(rules, RuleNoSpec)
	}
	if len(rules) == 0 && (p.refused || !o.floatingCPUs(p).IsEmpty()) {
		rules = append(rules, RuleRefusedWaits)
	}
	if len(rules) == 0 {
		return failf("%s refused (%s on the plugin's free CPUs): the kubelet admitted it on its state, which differs from the plugin's by no rule", what, why)
	}
	p.refused = true
	for _, r := range rules {
		o.Counts.Add(r, 1)
		o.Counts.Add("refusals explained by "+r, 1)
	}
	_ = name
	return nil
}

// judgeOnPlugin asks the kubelet's own code (a topology manager and a
// static policy started on a state made of the plugin's: its shared pool
// as the default set, its entries, the CPUs it holds for other pods'
// resizes) to admit p: the whole pod (name ""), or container name with
// the containers of p the plugin has entries for. It returns the
// kubelet's reason when it refuses, "" when it admits.
func (o *Oracle) judgeOnPlugin(p *pod, name string, snap plugin.Snapshot) (string, error) {
	pool, err := cpuset.Parse(snap.SharedPool)
	if err != nil {
		return "", err
	}
	st := state.NewMemoryState(logr.Discard())
	for uid, names := range snap.Exclusive {
		for cname := range names {
			e := pluginEntries(snap, types.UID(uid))[cname]
			st.SetCPUSet(uid, cname, e.assigned)
		}
	}
	for uid, h := range snap.Held {
		cpus, _ := cpuset.Parse(h.CPUs)
		if types.UID(uid) == p.uid {
			pool = pool.Union(cpus) // (the pod's own: its containers take them first)
			continue
		}
		st.SetCPUSet(uid, "held for its resize", cpus)
	}
	st.SetDefaultCPUSet(pool)
	k := &Kubelet{cfg: o.cfg, topo: o.kubelet.topo, info: o.kubelet.info, state: st, active: map[types.UID]*v1.Pod{}}
	if err := k.start(); err != nil {
		return "", fmt.Errorf("the kubelet's code on the plugin's state (pool %s): %w", pool, err)
	}
	pod := o.kubelet.allocated(p.v1)
	if !o.api() && o.cfg.PodScope() {
		// Without the pod's spec the plugin aligns the pod on its
		// pod-level CPU limit in whole CPUs (policy podScope), which
		// counts its fractional containers too: a container of that
		// many CPUs ahead of the others asks the kubelet the same.
		limit := p.recorded
		if limit == 0 {
			limit = p.current().limit
		}
		if need := int(limit / 1000); need > o.podGuaranteedCPUs(p) {
			c := v1.Container{Name: "(the pod's CPU limit)", Resources: p.spec.resources(int64(need) * 1000)}
			pod.Spec.InitContainers = append([]v1.Container{c}, pod.Spec.InitContainers...)
			o.Counts.Add("no spec: refusals judged on the pod's CPU limit (pod scope)", 1)
		}
	}
	if !o.api() {
		// Without the spec an init container the plugin has not told
		// (by its exit, or by lending its CPUs) lends nothing: on the
		// kubelet's side it is an app container that holds its CPUs.
		entries := pluginEntries(snap, p.uid)
		var inits []v1.Container
		for _, c := range pod.Spec.InitContainers {
			e, has := entries[c.Name]
			if has && c.RestartPolicy == nil && !e.init && !o.completedUnknown(p, c.Name) {
				pod.Spec.Containers = append([]v1.Container{c}, pod.Spec.Containers...)
				o.Counts.Add("no spec: refusals judged with an init container the plugin did not tell", 1)
				continue
			}
			inits = append(inits, c)
		}
		pod.Spec.InitContainers = inits
	}
	if name != "" && !o.cfg.PodScope() {
		keep := func(c v1.Container) bool {
			e := p.ctrs[c.Name]
			return c.Name != name && (e == nil || !e.absorbed)
		}
		pod.Spec.InitContainers = slices.DeleteFunc(pod.Spec.InitContainers, keep)
		pod.Spec.Containers = slices.DeleteFunc(pod.Spec.Containers, keep)
	}
	// (No removeStaleState first: the other pods' entries are the
	// plugin's, active or not.)
	res := k.manager.Admit(&kubelifecycle.PodAdmitAttributes{Pod: pod})
	if res.Admit {
		return "", nil
	}
	return res.Reason, nil
}
