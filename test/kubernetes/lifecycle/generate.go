package lifecycle

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"
)

// generator invents the next action from what the node runs.
type generator struct {
	rng  *rand.Rand
	next int
	// smt is the number of threads per core when the static policy takes
	// whole cores (full-pcpus-only): the counts it asks are mostly
	// multiples of it. 1 otherwise.
	smt int
}

// view is what the generator needs of the node.
type view struct {
	pods map[string]*podView
	// deadlines are the times from now when something is due: the
	// plugin's timers the oracle predicts and the kubelet's retries.
	deadlines []time.Duration
}

// podView is what the generator needs of a pod that exists.
type podView struct {
	spec      *PodSpec
	completed bool
	// starting: steps of its start remain.
	starting bool
	// running are the names whose latest instance runs, init containers
	// aside.
	running []string
	// exclusive are the running app containers and sidecars that hold
	// exclusive CPUs and could be resized, with the CPUs (milli) the
	// runtime has for them.
	exclusive map[string]int64
}

// sorted returns m's keys in order.
func sorted[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// action returns a random action for the node as v shows it.
func (g *generator) action(v view) Action {
	names := sorted(v.pods)
	var live, restartable, completed, jobs, resizable, starting, exitable []string
	for _, n := range names {
		p := v.pods[n]
		if p.completed {
			completed = append(completed, n)
			continue
		}
		live = append(live, n)
		if p.starting {
			starting = append(starting, n)
		}
		if p.spec.Job {
			jobs = append(jobs, n) // (restartPolicy: Never: a crash fails the pod, not played)
		} else if len(p.running) > 0 {
			restartable = append(restartable, n)
			exitable = append(exitable, n)
		}
		if len(p.exclusive) > 0 {
			resizable = append(resizable, n)
		}
	}
	pick := func(list []string) string { return list[g.rng.IntN(len(list))] }
	for {
		switch k := g.rng.IntN(100); {
		case k < 20 || len(live) == 0:
			if len(names) < 8 {
				return Action{Op: OpStart, Spec: g.pod(), Interleave: g.rng.IntN(5) < 3}
			}
		case k < 34 && len(starting) > 0:
			return Action{Op: OpStep, Pod: pick(starting)}
		case k < 41 && len(exitable) > 0:
			p := v.pods[pick(exitable)]
			// Exit 0 too: a sidecar or an app container of a pod that
			// restarts its containers is restarted whatever its code.
			code := []int32{0, 1, 137, 2}[g.rng.IntN(4)]
			return Action{Op: OpExit, Pod: p.spec.Name, Container: p.running[g.rng.IntN(len(p.running))], Code: code}
		case k < 46 && len(restartable) > 0:
			p := v.pods[pick(restartable)]
			code := []int32{1, 137, 2}[g.rng.IntN(3)]
			return Action{Op: OpCrash, Pod: p.spec.Name, Container: p.running[g.rng.IntN(len(p.running))], Code: code, RemoveFirst: g.rng.IntN(2) == 0}
		case k < 50 && len(restartable) > 0:
			return Action{Op: OpRecreateSandbox, Pod: pick(restartable)}
		case k < 55:
			return Action{Op: OpCollect}
		case k < 58 && len(jobs) > 0:
			return Action{Op: OpComplete, Pod: pick(jobs)}
		case k < 65 && len(names) > 0:
			return Action{Op: OpDelete, Pod: pick(names)}
		case k < 76 && len(resizable) > 0:
			p := v.pods[pick(resizable)]
			cs := sorted(p.exclusive)
			c := cs[g.rng.IntN(len(cs))]
			return Action{Op: OpResize, Pod: p.spec.Name, Container: c, Milli: g.resized(p.exclusive[c])}
		case k < 81:
			return Action{Op: OpWait, Wait: g.wait(v.deadlines).String(), Pulling: g.rng.IntN(5) == 0}
		case k < 83:
			return Action{Op: OpReboot}
		case k < 84 && len(live) > 0:
			return Action{Op: OpRebootDeleting, Pod: pick(live)}
		case k < 87:
			return Action{Op: OpRestartContainerd}
		case k < 89:
			return Action{Op: OpRestartPlugin}
		case k < 91 && len(names) > 0:
			return Action{Op: OpDeleteWhilePluginDown, Pod: pick(names)}
		case k < 93:
			return Action{Op: OpRestartKubelet}
		case len(starting) > 0:
			return Action{Op: OpStep, Pod: pick(starting)}
		}
	}
}

// resized returns a container's new CPUs (milli) for a resize from cur.
func (g *generator) resized(cur int64) int64 {
	step := int64(1)
	if g.smt > 1 && g.rng.IntN(5) > 0 {
		step = int64(g.smt)
	}
	n := max(1, cur/1000+step*int64(g.rng.IntN(5)-2))
	return n * 1000
}

// wait returns how long a wait lasts: often just before, at or just
// after something due (a timer's end must be seen neither early nor
// late), else a while around the plugin's timeouts.
func (g *generator) wait(deadlines []time.Duration) time.Duration {
	if len(deadlines) > 0 && g.rng.IntN(2) == 0 {
		d := deadlines[g.rng.IntN(len(deadlines))]
		return max(0, d+time.Duration(g.rng.IntN(3)-1)*time.Second)
	}
	return []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 4*time.Minute + 59*time.Second,
		5 * time.Minute, 5*time.Minute + time.Second, 9*time.Minute + 59*time.Second, 10 * time.Minute,
		10*time.Minute + time.Second, 15 * time.Minute}[g.rng.IntN(10)]
}

// pod invents a pod.
func (g *generator) pod() *PodSpec {
	g.next++
	s := &PodSpec{Name: fmt.Sprintf("p%d", g.next)}
	switch k := g.rng.IntN(10); {
	case k < 7:
		s.QoS = "guaranteed"
	case k < 9:
		s.QoS = "burstable"
	default:
		s.QoS = "besteffort"
	}
	cpus := func() int64 {
		if s.QoS == "besteffort" {
			return 0
		}
		if g.rng.IntN(4) == 0 {
			return int64(100 + 100*g.rng.IntN(15)) // fractional
		}
		if g.smt > 1 && g.rng.IntN(6) > 0 {
			return int64(g.smt*(1+g.rng.IntN(2))) * 1000
		}
		return int64(1+g.rng.IntN(3)) * 1000
	}
	for i := range g.rng.IntN(3) {
		s.Containers = append(s.Containers, ContainerSpec{Name: fmt.Sprintf("init%d", i), Kind: KindInit, Milli: cpus()})
	}
	if g.rng.IntN(3) == 0 {
		// A sidecar among the init containers.
		at := g.rng.IntN(len(s.Containers) + 1)
		s.Containers = slices.Insert(s.Containers, at, ContainerSpec{Name: "side", Kind: KindSidecar, Milli: cpus()})
		s.SidecarCrashesAtStart = g.rng.IntN(4) == 0
	}
	for i := range 1 + g.rng.IntN(2) {
		s.Containers = append(s.Containers, ContainerSpec{Name: fmt.Sprintf("app%d", i), Kind: KindApp, Milli: cpus()})
	}
	s.Job = g.rng.IntN(5) == 0
	if g.rng.IntN(6) == 0 {
		s.OverheadMilli = 250
	}
	return s
}
