package fakeruntime

import (
	"fmt"
	"math/bits"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// exclusive tells whether a container holds exclusive CPUs: a Guaranteed
// container with whole CPUs (its pool never changes, the plugin refuses it)
// that the test does not expect on the shared pool (see ExpectShared). Each
// distinct cgroup parent and resources is classified once.
func (r *Runtime) exclusive(c *api.Container) bool {
	if r.expectShared[c.Id] {
		return false
	}
	pod := r.pods[c.PodSandboxId]
	res := c.GetLinux().GetResources()
	key := classKey{parent: pod.GetLinux().GetCgroupParent(), res: policy.Resources{
		CPUShares:   res.GetCpu().GetShares().GetValue(),
		CPUQuota:    res.GetCpu().GetQuota().GetValue(),
		CPUPeriod:   res.GetCpu().GetPeriod().GetValue(),
		MemoryLimit: res.GetMemory().GetLimit().GetValue(),
	}}
	excl, ok := r.classes[key]
	if !ok {
		excl = policy.Classify(policy.QoSFromCgroupParent(key.parent), key.res).Exclusive
		r.classes[key] = excl
	}
	return excl
}

// classKey is what decides a container's class.
type classKey struct {
	parent string
	res    policy.Resources
}

// check records a violation of the no-overlap invariant among running
// containers. It runs after every single applied update, so it reads the
// per-CPU counts that track keeps (see overlaps) and only looks closer
// when they show an overlap: a check costs nothing, an update as many
// steps as CPUs change.
func (r *Runtime) check(after string) {
	if r.unchecked.Load() || r.overlaps.bad == 0 {
		return
	}
	r.explain(after)
}

// track brings the invariant check's counts up to date with container c
// (its cpuset, resources and state, and whether it still exists), after
// any change of it. Called with mu held.
func (r *Runtime) track(c *api.Container) {
	running := c.State != api.ContainerState_CONTAINER_STOPPED && r.containers[c.Id] == c
	m, ok := r.parse(c.Linux.Resources.Cpu.Cpus)
	if !ok {
		if running && !r.unchecked.Load() {
			r.violations = append(r.violations, fmt.Sprintf("%s has invalid cpuset %q", c.Name, c.Linux.Resources.Cpu.Cpus))
		}
		m = nil
	}
	r.overlaps.set(c.Id, m, r.exclusive(c), running)
}

// untrack drops a removed container from the invariant check's counts.
func (r *Runtime) untrack(id string) {
	r.overlaps.set(id, nil, false, false)
}

// resync rebuilds the invariant check's counts from every container.
func (r *Runtime) resync() {
	r.overlaps = newOverlaps()
	for _, c := range r.containers {
		r.track(c)
	}
}

// overlaps counts, for every CPU, the running exclusive and shared
// containers whose cpuset holds it, and how many CPUs are held by two
// exclusive containers or by an exclusive and a shared one.
type overlaps struct {
	sets              map[string]countedSet
	exclusive, shared []int32
	bad               int
}

// countedSet is a container's cpuset as counted.
type countedSet struct {
	mask      cpumask.Mask
	exclusive bool
}

func newOverlaps() *overlaps { return &overlaps{sets: map[string]countedSet{}} }

// set makes container id count with mask (nothing when not running).
func (o *overlaps) set(id string, mask cpumask.Mask, exclusive, running bool) {
	old, had := o.sets[id]
	if had && running && old.exclusive == exclusive {
		// Only the CPUs that change: a shared container's update moves a
		// few CPUs of a pool of thousands.
		for w := 0; w < max(len(old.mask), len(mask)); w++ {
			var a, b uint64
			if w < len(old.mask) {
				a = old.mask[w]
			}
			if w < len(mask) {
				b = mask[w]
			}
			for x := a ^ b; x != 0; x &= x - 1 {
				bit := bits.TrailingZeros64(x)
				if a&(1<<bit) != 0 {
					o.count(w*64+bit, exclusive, -1)
				} else {
					o.count(w*64+bit, exclusive, 1)
				}
			}
		}
		o.sets[id] = countedSet{mask: mask, exclusive: exclusive}
		return
	}
	if had {
		for cpu := range old.mask.All() {
			o.count(cpu, old.exclusive, -1)
		}
		delete(o.sets, id)
	}
	if running {
		for cpu := range mask.All() {
			o.count(cpu, exclusive, 1)
		}
		o.sets[id] = countedSet{mask: mask, exclusive: exclusive}
	}
}

// count adds delta to the exclusive or shared holders of cpu.
func (o *overlaps) count(cpu int, exclusive bool, delta int32) {
	if cpu >= len(o.exclusive) {
		n := max(cpu+1, 2*len(o.exclusive))
		o.exclusive = append(o.exclusive, make([]int32, n-len(o.exclusive))...)
		o.shared = append(o.shared, make([]int32, n-len(o.shared))...)
	}
	was := o.overlapping(cpu)
	if exclusive {
		o.exclusive[cpu] += delta
	} else {
		o.shared[cpu] += delta
	}
	if now := o.overlapping(cpu); now != was {
		if now {
			o.bad++
		} else {
			o.bad--
		}
	}
}

func (o *overlaps) overlapping(cpu int) bool {
	return o.exclusive[cpu] >= 2 || (o.exclusive[cpu] >= 1 && o.shared[cpu] >= 1)
}

// explain records which containers overlap (the slow, precise check, run
// only once check found an overlap).
func (r *Runtime) explain(after string) {
	applied := map[string]cpuset.CPUSet{}
	excl := map[string]bool{}
	for id, c := range r.containers {
		if c.State == api.ContainerState_CONTAINER_STOPPED {
			continue
		}
		cpus, err := cpuset.Parse(c.Linux.Resources.Cpu.Cpus)
		if err != nil {
			continue
		}
		applied[id] = cpus
		excl[id] = r.exclusive(c)
	}
	if err := policy.CheckApplied(applied, func(id string) bool { return excl[id] }); err != nil {
		r.violations = append(r.violations, fmt.Sprintf("after %s: %v", after, err))
	}
}

// parse returns the bitmap of a cpuset text, parsed once per distinct text.
func (r *Runtime) parse(text string) (cpumask.Mask, bool) {
	if m, ok := r.parsed[text]; ok {
		return m, m != nil
	}
	cpus, err := cpumask.Parse(text, cpumask.MaxID)
	var m cpumask.Mask
	if err == nil {
		m, _ = cpumask.Of(cpus)
		if m == nil {
			m = cpumask.Mask{}
		}
	}
	if len(r.parsed) > 1<<16 { // a long run: start over rather than grow without bound
		clear(r.parsed)
	}
	r.parsed[text] = m
	return m, m != nil
}
