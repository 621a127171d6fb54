package lifecycle

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Rule is a named allowance: a place where the plugin may differ from the
// kubelet's CPU manager, what it allows, and the kubelet's (or KEP's)
// code that justifies it. The comparison fails on every difference no
// rule explains; each rule's uses are counted.
type Rule struct {
	Name string
	// Allows says what differs, and what the oracle checks instead.
	Allows string
	// Because is the reference that justifies it: the kubelet's file and
	// function, or KEP-5554.
	Because string
}

// The rules' names.
const (
	RuleSameCPUs         = "same CPUs"
	RuleInitReuse        = "init reuse"
	RuleResize           = "resize"
	RuleHold             = "hold"
	RuleOrphan           = "orphan"
	RuleRestartOnOwnCPUs = "restart on own CPUs"
	RuleNoSpec           = "no spec"
	RuleReadmitAllocated = "readmit as allocated"
	RuleRestartSMT       = "restart SMT check"
	RuleRefusedWaits     = "refused pod waits"
	RuleStoppedUnknown   = "stopped, limit unknown"
)

// Rules is the table of every allowance.
var Rules = []Rule{
	{RuleSameCPUs,
		"both admit a container (or pod) and the plugin picks other CPUs: each container gets as many, each CPU is free or reusable for its pod in the kubelet's state (init containers' CPUs for the containers after them, never a sidecar's), its NUMA nodes (the pod's in the pod scope) are those of a hint the kubelet's topology manager admits with (a preferred one of the merged hint's width; any one under none), whole cores under full-pcpus-only, and the pod's CPUs are no more than the kubelet's allocation (with the API); then the plugin's CPUs are written into the kubelet's state and compared exactly from then on. Counted apart: the CPUs that differ from the kubelet's pick, and the picks on other NUMA nodes than its merged hint",
		"policy_static.go allocateCPUs and takeByTopology (which CPUs of an affinity is the allocator's choice: make placement-diff judges it); topologymanager policy.go HintMerger.Merge (among preferred hints of equal width it takes the lowest-numbered nodes; any of them admits)"},
	{RuleInitReuse,
		"the kubelet's own pick held more CPUs for a pod than the plugin's (counted in CPUs): the plugin takes its pod's init containers' CPUs first",
		"policy_static.go allocateCPUs (takeByTopology over the free and the reusable CPUs together) and updateCPUsToReuse"},
	{RuleResize,
		"an in-place resize of a pinned container: the kubelet v1.36 has none, KEP-5554's rules decide it on the kubelet's state (a shrink below the recorded baseline is Infeasible: prohibitedCPUAllocationError; a growth the free CPUs, those held for its pod and its pod's reusable init CPUs can hold under the topology policy and full-pcpus-only is accepted, else Infeasible: resizeAllocateCPUsError; a count full-pcpus-only cannot align is Infeasible: SMTAlignmentError; the baseline is kept; a refusal changes nothing); a decrease may keep any of its CPUs beyond the baseline (KEP-5554 does not say which go), so a whole resize is refused only when no choice lets every part fit, the choices that do counted, and the plugin's own choice is then checked as any resize's; the kubelet's state is brought along",
		"KEP-5554; kubelet v1.36 allocation/handlers.go (PodResizesAdmitHandler: a CPU resize of a Guaranteed pod under the static policy is Infeasible)"},
	{RuleHold,
		"CPUs an UpdateContainer's decrease released while its pod's resize is in flight (the limits of the containers the plugin knows do not add up to the pod's total, the last UpdatePodSandbox's or the sandbox's) are held for the pod, not in the shared pool, until the pod adds up again, its containers take them, or the hold timeout (5 minutes) ends, to the second; the kubelet's copy of the decrease gave them back (a re-creation's or a Synchronize's decrease gives them back too)",
		"KEP-5554 (docs/design.md \"A pod's resize\"); the kubelet v1.36 has no resize of pinned CPUs (allocation/handlers.go)"},
	{RuleOrphan,
		"a pod the kubelet ended keeps its CPUs in the plugin while nothing tells the plugin it ended: without the API (a completed Job, a pod deleted with a sandbox of an earlier containerd or while the node was down) until its last known sandbox's removal is relayed, a Synchronize lists none, or it has been idle for the orphan timeout (10 minutes, to the second; the idle mark is not in the checkpoint: a restart of the plugin starts it again); with the API until the plugin's next maintenance pass once it is idle",
		"cpu_manager.go removeStaleState (the kubelet's end of a pod, which the runtime does not relay)"},
	{RuleRestartOnOwnCPUs,
		"a re-creation (or a Synchronize) asking a count the resize rules refuse keeps its CPUs: the kubelet's copy keeps them too, and the count it asked is not applied",
		"policy_static.go Allocate (\"container already present in state, skipping\": a restart keeps the entry); KEP-5554 (docs/design.md \"A re-creation is never refused\")"},
	{RuleNoSpec,
		"without the API the plugin decides per container at its creation and infers init containers from their exits and the pod's total: the kubelet's entries of containers it has not created hold CPUs it keeps in its shared pool (they move, by the kubelet's Allocate, when the plugin gives them to others, and stay put when they cannot); a creation the kubelet admitted and the plugin refuses is one the kubelet's own code refuses on the plugin's free CPUs (in the pod scope for the pod's CPU limit, which the plugin aligns on), its reason counted; a new container may take the CPUs of its pod's containers that do not run, and a container whose CPUs were so taken moves at its restart (its baseline with it); a pod may hold more than the kubelet's allocation; a restarted kubelet that would refuse a pod on these decisions keeps it",
		"topologymanager scope_container.go/scope_pod.go Admit (the kubelet allocates every container at the pod's admission, from the pod's spec, which NRI does not carry)"},
	{RuleReadmitAllocated,
		"when the kubelet admits its pods again (a restart of the kubelet or of the node) it admits each container with the CPUs its entry holds (its allocated resources), not the spec's count of a resize the plugin refused",
		"allocation manager (the kubelet admits with allocated resources); policy_static.go GetTopologyHints (an entry whose size differs from the request gets no hint: the pod would be refused)"},
	{RuleRefusedWaits,
		"a pod whose admission the plugin refused for another rule's reason (orphan, hold, no spec) takes nothing until a later creation of it fits, while the kubelet's state keeps the CPUs it admitted it on: the plugin may give those CPUs to other containers meanwhile, and refuse the pod again for that; a restarted kubelet, whose state the comparison brought along with the plugin's, refuses such a pod too, and it keeps waiting",
		"kuberuntime_manager.go SyncPod (the kubelet retries a failed creation at the pod's next sync); pod_workers.go backOffPeriod; kubelet.go HandlePodAdditions (a restarted kubelet admits its pods again)"},
	{RuleStoppedUnknown,
		"with the API a pod's resize is decided over every member, a stopped one by its entry; a member that does not run and that the plugin has not seen since its own restart (it keeps no container of it, and the limit it last ran with is not in its checkpoint) is left to its re-creation, which decides its count by the resize rules",
		"kuberuntime_manager.go computePodResizeAction (the kubelet sends a container that does not run nothing: its restart carries the new count); docs/design.md \"Admission\" (a member the plugin knows nothing of)"},
	{RuleRestartSMT,
		"a restarted kubelet under full-pcpus-only would reject a pod it runs whose CPUs outnumber the free whole cores (it checks them before it finds the containers already allocated); the oracle's kubelet keeps it, as the fixed kubelet does, and so does the plugin",
		"policy_static.go Allocate (enforceSMTAlignment before \"container already present in state\"): kubernetes/kubernetes#129078, fixed by #129079 after v1.36"},
}

// Counts counts each rule's uses and the measures the comparison reports.
type Counts map[string]int

// Add counts n uses of a rule or measure.
func (c Counts) Add(name string, n int) { c[name] += n }

// Merge adds other's counts.
func (c Counts) Merge(other Counts) {
	for k, v := range other {
		c[k] += v
	}
}

// Table prints the rules with their counts, then the other measures.
func (c Counts) Table() string {
	var b strings.Builder
	known := map[string]bool{}
	fmt.Fprintf(&b, "%-22s %8s  %s\n", "rule", "uses", "justified by")
	for _, r := range Rules {
		known[r.Name] = true
		fmt.Fprintf(&b, "%-22s %8d  %s\n", r.Name, c[r.Name], r.Because)
	}
	for _, k := range slices.Sorted(maps.Keys(c)) {
		if !known[k] {
			fmt.Fprintf(&b, "  %-40s %8d\n", k, c[k])
		}
	}
	return b.String()
}
