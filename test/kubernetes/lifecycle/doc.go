// Package lifecycle compares the plugin with the kubelet's own CPU
// management over whole pod lives, CPU for CPU.
//
// # The two sides
//
// The kubelet (Kubelet) is v1.36.3's topology manager
// (topologymanager.NewManager with the node's policy and scope) with the
// static CPU manager policy (NewStaticPolicy with its options and
// reserved CPUs) as its hint provider, on an in-memory state that
// survives what its checkpoint survives: it admits a pod at its first
// step (every container, in the spec's order), ends it at removeStaleState
// and admits its pods again at a restart. The plugin runs over NRI on
// test/fakeruntime (containerd 2.4's NRI side), with its checkpoint on a
// file system, once watching a Kubernetes API that knows the pods' specs
// and phases, once without it.
//
// # The nodes
//
// Configs: 16 CPUs of SMT 2 on one NUMA node (topology manager none), and
// on two NUMA nodes under single-numa-node (container scope), restricted
// (pod scope), single-numa-node (pod scope) with full-pcpus-only and
// reserved CPUs that are a whole core, and single-numa-node with reserved
// CPUs 0-1 and isolated CPUs (isolcpus; both sides treat them as any CPU).
//
// # The lives
//
// A generator plays random lives: Guaranteed pods of whole-CPU and
// fractional containers with init containers and a sidecar, Burstable and
// BestEffort neighbours, Jobs, pod overhead (on the sandbox and in
// UpdatePodSandbox, as containerd passes it on); starts in one action or
// one step per action (the sandbox with the kubelet's admission, then
// each init container's creation and exit 0, each sidecar's, each app
// container's), other pods' events between the steps; containers that
// exit (codes 0, 1, 2, 137: restartable ones exiting 0 too) and stay down
// until the kubelet's crash-loop back-off is over, or are re-created in
// the same action; sandbox re-creations, the container GC, completions,
// deletions, in-place resizes, waits; node reboots (one with a pod deleted
// while the node is down), restarts of containerd, of the plugin (one
// with a pod deleted while it is down) and of the kubelet alone. Each
// action's NRI events come in the order containerd delivers them for that
// kubelet action (docs/development.md has the mapping).
//
// # Time
//
// The oracle owns the plugin's clock (policy.Options.Now): an action
// takes a second; a wait (an action) lasts a random time, often just
// before, at or after something due. On its way the kubelet syncs: it
// re-creates a container whose back-off is over (10 s doubling to 5
// minutes) and retries a creation the plugin refused (10 s later). The
// plugin's timers are predicted, never waited out: a pod idle for the
// orphan timeout (policy.DefaultOrphanTimeout) and CPUs held for the hold
// timeout (policy.DefaultHoldTimeout) end exactly then, not before, not
// after.
//
// # The comparison
//
// When the plugin gives a container CPUs (an admission: with the API the
// whole pod's at its sandbox; without it a container's at its creation),
// they must be a choice the kubelet could have made, and are written into
// the kubelet's state (rule same CPUs; Kubelet.Rebuild makes its static
// policy follow). From then on, after every action, the comparison is
// exact: each entry of the plugin is the kubelet's, with the kubelet's
// recorded baseline (the entry as admitted, which v1.37's checkpoint keeps
// as baselines); each running container runs on its entry, or on the
// shared pool when the kubelet does not pin it (an init container is
// compared at its creation: it exits in the same action); the plugin's
// shared pool is the kubelet's default set, CPU for CPU, but the CPUs a
// rule explains; its holds and idle pods are the predicted ones. A
// creation the plugin refuses must be refused by the kubelet's own code on
// the plugin's free CPUs, for a reason a rule gives. A resize is decided
// by KEP-5554's rules on the kubelet's state (resizeVerdict); the
// kubelet's state follows what the plugin applied.
//
// Every allowance is a rule of the table in rules.go (Rules), with the
// kubelet code that justifies it, counted per run and printed at the end;
// any other difference fails the test.
//
// # Running it
//
// Each run has a new seed, printed; LIFECYCLE_SEED=n plays seed n again
// (every life of it; -run 'TestLifecycleMatchesTheKubelet/seed=n/life=i/'
// one). LIFECYCLE_ACTIONS (20 000) and LIFECYCLE_LIFE (2 000 per life)
// size the run (make lifecycle-soak: a million). LIFECYCLE_API=on plays
// only the lives with the API (those of make lifecycle-diff, in make
// test: the lives without it still differ from the kubelet,
// docs/development.md says where), =off only those without it; a life
// keeps its number, and the replay line says the variable.
// LIFECYCLE_TRACE=1 prints both sides after every action,
// LIFECYCLE_PLUGIN_LOG=1 the plugin's log at debug level;
// LIFECYCLE_KEEP=1 writes a failing life to testdata/lives, where every
// later run plays it first.
package lifecycle
