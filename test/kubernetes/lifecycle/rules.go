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
)

// Rules is the table of every allowance.
var Rules = []Rule{
	{RuleSameCPUs,
		"both admit a container (or pod) and the plugin picks other CPUs: each container gets as many, each CPU is free or reusable for its pod in the kubelet's state (init containers' CPUs for the containers after them, never a sidecar's), its NUMA nodes are those of a hint the kubelet's topology manager admits with (a preferred one of the merged hint's width; any one under none), and the pod's CPUs are no more than the kubelet's; then the plugin's CPUs are written into the kubelet's state and compared exactly from then on",
		"policy_static.go allocateCPUs and takeByTopology (which CPUs of an affinity is the allocator's choice: make placement-diff judges it); topologymanager policy.go HintMerger.Merge (among preferred hints of equal width it takes the lowest-numbered nodes; any of them admits)"},
	{RuleInitReuse,
		"the kubelet's own pick held more CPUs for a pod than the plugin's (counted in CPUs): the plugin takes its pod's init containers' CPUs first",
		"policy_static.go allocateCPUs (takeByTopology over the free and the reusable CPUs together) and updateCPUsToReuse"},
	{RuleResize,
		"an in-place resize of a pinned container: the kubelet v1.36 has none, KEP-5554's rules decide it on the kubelet's state (a shrink below the recorded baseline is Infeasible: prohibitedCPUAllocationError; a growth the free CPUs, those held for its pod and its pod's reusable init CPUs can hold under the topology policy and full-pcpus-only is accepted, else Infeasible: resizeAllocateCPUsError; a count full-pcpus-only cannot align is Infeasible: SMTAlignmentError; the baseline is kept; a refusal changes nothing); the kubelet's state is brought along",
		"KEP-5554; kubelet v1.36 allocation/handlers.go (PodResizesAdmitHandler: a CPU resize of a Guaranteed pod under the static policy is Infeasible)"},
	{RuleHold,
		"CPUs a decrease released while its pod's resize is in flight (its containers' limits do not add up to its total) are held for the pod, not in the shared pool, until the pod adds up again or for the hold timeout (5 minutes), to the second; the kubelet's copy of the decrease gave them back",
		"KEP-5554 (docs/design.md \"A pod's resize\"); the kubelet v1.36 has no resize of pinned CPUs (allocation/handlers.go)"},
	{RuleOrphan,
		"a pod the kubelet ended keeps its CPUs in the plugin while nothing tells the plugin it ended (no API: a completed Job, a pod deleted with a sandbox of an earlier containerd or while the node was down), until the orphan timeout (10 minutes idle), to the second; with the API a pod none of whose containers runs and that the API no longer lists ends at once",
		"cpu_manager.go removeStaleState (the kubelet's end of a pod, which the runtime does not relay)"},
	{RuleRestartOnOwnCPUs,
		"a re-creation (or a Synchronize) asking a count the resize rules refuse keeps its CPUs: the kubelet's copy keeps them too, and the count it asked is not applied",
		"policy_static.go Allocate (\"container already present in state, skipping\": a restart keeps the entry); KEP-5554 (docs/design.md \"A re-creation is never refused\")"},
	{RuleNoSpec,
		"without the API the plugin decides per container at its creation: the kubelet's entries of containers it has not created hold CPUs it keeps in its shared pool (they move when the plugin gives them to others); a creation the kubelet admitted and the plugin refuses is one the kubelet's own code refuses on the plugin's free CPUs; a sidecar that exited 0 before an app container was created is taken for an init container and moves (its baseline with it)",
		"topologymanager scope_container.go/scope_pod.go Admit (the kubelet allocates every container at the pod's admission, from the pod's spec, which NRI does not carry)"},
	{RuleReadmitAllocated,
		"when the kubelet admits its pods again (a restart of the kubelet or of the node) it admits each container with the CPUs its entry holds (its allocated resources), not the spec's count of a resize the plugin refused",
		"allocation manager (the kubelet admits with allocated resources); policy_static.go GetTopologyHints (an entry whose size differs from the request gets no hint: the pod would be refused)"},
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
