package lifecycle

import (
	"slices"
	"time"

	"github.com/containerd/nri/pkg/api"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"
)

// pod is a pod the life started, as the kubelet and the runtime have it.
type pod struct {
	// spec is the pod's spec as the API has it (a resize changes it; the
	// kubelet takes it for allocated at once, as v1.36 admits a resize
	// before it actuates it), v1 the same as a v1.Pod.
	spec *PodSpec
	v1   *v1.Pod
	uid  types.UID
	// sandboxes are the pod's sandboxes in the runtime, the current one
	// last; ghosts those the runtime removed without telling the plugin
	// (containerd does not relay the removal of a sandbox of its earlier
	// lives), which the plugin still knows until its next Synchronize.
	sandboxes, ghosts []*sandbox
	// ctrs are the pod's containers by name.
	ctrs map[string]*ctr
	// steps are the steps of its start, next the first not done.
	steps []step
	next  int
	// completed: a Job whose containers all exited 0 (phase Succeeded).
	completed bool
	// recorded is the pod's CPU limit (milli) from the last
	// UpdatePodSandbox the plugin accepted (0: none).
	recorded int64
	// kubeletUnion is how many CPUs the kubelet's own allocation held for
	// the pod when it admitted it (the bound of the plugin's).
	kubeletUnion int
	// kubeletPick is the kubelet's own allocation at admission, by name.
	kubeletPick map[string]cpuset.CPUSet
	// initReuseCounted: the init reuse difference was counted.
	initReuseCounted bool
	// refused: the plugin refused a creation of it (or, with the API,
	// its admission) for a rule's reason.
	refused bool
}

// sandbox is one sandbox of a pod.
type sandbox struct {
	sb *api.PodSandbox
	// epoch is the containerd life it was run in: containerd relays the
	// stop and removal of sandboxes of its own life only.
	epoch int
	// known: the plugin knows it (it saw it run and not replaced by a
	// newer one, or its last Synchronize listed it) and not its removal;
	// confirmed: it saw it run since its last Synchronize; stopped: it
	// saw it stop.
	known, confirmed, stopped bool
	// limit is its pod resources' CPU limit (milli), as the kubelet ran
	// it (0: none).
	limit int64
}

// ctr is a container name of a pod.
type ctr struct {
	name string
	// current is its latest instance (nil before its first creation).
	current *instance
	// dead are exited instances the container GC has not removed yet.
	dead []*instance
	// pending: the kubelet owes a creation (after an exit, or one the
	// plugin refused), which it tries at retryAt.
	pending bool
	retryAt time.Time
	// limitKept: the plugin keeps the CPU limit of an instance it no
	// longer tracks (policy Model.RemovedLimits: an instance the runtime
	// removed, or a Synchronize left out, while the plugin process
	// lived); its restart forgets it.
	limitKept bool
	// exits counts its exits in a row (the crash-loop back-off), lastExit
	// is the time of the latest.
	exits    int
	lastExit time.Time
	// absorbed: the plugin's entry for it was written into the kubelet's
	// state; synced is the plugin's CPUs then (its assigned CPUs).
	absorbed bool
	synced   cpuset.CPUSet
}

// instance is one container of a name in the runtime.
type instance struct {
	c *api.Container
	// limit is the CPU limit (milli) the runtime has for it, as created
	// or last resized.
	limit int64
	// running: its process runs.
	running bool
	// tracked: the plugin knows it (it saw its creation since its last
	// Synchronize, or the Synchronize listed it) and not its removal.
	tracked bool
	// completed: it exited with code 0.
	completed bool
}

// step is one step of a pod's start.
type step struct {
	op   string // stepCreate, stepExit, stepExitSidecars, stepCreateSidecars
	name string
}

// Steps of a pod's start.
const (
	stepCreate         = "create"
	stepExit           = "exit"
	stepExitSidecars   = "exitSidecars"
	stepCreateSidecars = "createSidecars"
)

// startSteps returns the steps of a pod's start, as the kubelet takes
// them: each init container until it exits 0 (a sidecar is started and
// left running), then the app containers, one at a time.
func startSteps(s *PodSpec) []step {
	var steps []step
	var sidecars bool
	for _, c := range s.Containers {
		switch c.Kind {
		case KindInit:
			steps = append(steps, step{stepCreate, c.Name}, step{stepExit, c.Name})
		case KindSidecar:
			steps = append(steps, step{stepCreate, c.Name})
			sidecars = true
		}
	}
	crashing := s.SidecarCrashesAtStart && sidecars
	if crashing {
		steps = append(steps, step{op: stepExitSidecars})
	}
	for _, c := range s.Containers {
		if c.Kind == KindApp {
			steps = append(steps, step{stepCreate, c.Name})
		}
	}
	if crashing {
		steps = append(steps, step{op: stepCreateSidecars})
	}
	return steps
}

// container returns the state of container name.
func (p *pod) container(name string) *ctr {
	c := p.ctrs[name]
	if c == nil {
		c = &ctr{name: name}
		p.ctrs[name] = c
	}
	return c
}

// running reports whether container name's latest instance runs.
func (p *pod) running(name string) bool {
	c := p.ctrs[name]
	return c != nil && c.current != nil && c.current.running
}

// runs reports whether any container of the pod runs.
func (p *pod) runs() bool {
	for _, c := range p.ctrs {
		if c.current != nil && c.current.running {
			return true
		}
	}
	return false
}

// starting reports whether steps of its start remain.
func (p *pod) starting() bool { return p.next < len(p.steps) }

// current returns the pod's current sandbox.
func (p *pod) current() *sandbox { return p.sandboxes[len(p.sandboxes)-1] }

// names returns the pod's container names in spec order.
func (p *pod) names() []string {
	var out []string
	for _, c := range p.spec.Containers {
		out = append(out, c.Name)
	}
	return out
}

// instances returns every instance of the pod in the runtime.
func (p *pod) instances() []*instance {
	var out []*instance
	for _, name := range p.names() {
		c := p.ctrs[name]
		if c == nil {
			continue
		}
		out = append(out, c.dead...)
		if c.current != nil && !slices.Contains(c.dead, c.current) {
			out = append(out, c.current)
		}
	}
	return out
}

// tracks reports whether the plugin tracks an instance of the container
// (the current one or a dead one).
func (c *ctr) tracks() bool {
	if c.current != nil && c.current.tracked {
		return true
	}
	for _, in := range c.dead {
		if in.tracked {
			return true
		}
	}
	return false
}
