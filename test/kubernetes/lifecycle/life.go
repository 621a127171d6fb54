package lifecycle

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
)

// Kinds of container, as a pod's spec has them.
const (
	KindInit    = "init"    // an ordinary init container
	KindSidecar = "sidecar" // an init container with restartPolicy: Always
	KindApp     = "app"
)

// ContainerSpec is one container of a pod's spec.
type ContainerSpec struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Milli is the container's CPU request, and its limit in a Guaranteed
	// pod (a Burstable container has no limit; a BestEffort one neither).
	Milli int64 `json:"milli"`
}

// PodSpec is what a life starts a pod with.
type PodSpec struct {
	Name string `json:"name"`
	// QoS is guaranteed, burstable or besteffort.
	QoS string `json:"qos"`
	// Containers are the init containers and sidecars in their order,
	// then the app containers.
	Containers []ContainerSpec `json:"containers"`
	// Job pods (restartPolicy: Never) complete.
	Job bool `json:"job,omitempty"`
	// OverheadMilli is a RuntimeClass's pod overhead.
	OverheadMilli int64 `json:"overheadMilli,omitempty"`
	// SidecarCrashesAtStart: the pod's sidecars exit (code 1) just before
	// its app containers are created, and restart after them.
	SidecarCrashesAtStart bool `json:"sidecarCrashesAtStart,omitempty"`
}

// Operations of a life.
const (
	OpStart             = "start"             // admit and start a pod
	OpCrash             = "crash"             // a container exits, the kubelet re-creates it
	OpRecreateSandbox   = "recreateSandbox"   // the pause container dies
	OpCollect           = "collect"           // the container GC: dead containers and old sandboxes
	OpComplete          = "complete"          // a Job's containers exit 0
	OpDelete            = "delete"            // the pod is deleted
	OpResize            = "resize"            // an in-place resize of a container
	OpReboot            = "reboot"            // the node reboots
	OpRestartContainerd = "restartContainerd" // containerd restarts, containers keep running
	OpRestartPlugin     = "restartPlugin"     // the plugin restarts
)

// Action is one step of a life.
type Action struct {
	Op        string   `json:"op"`
	Pod       string   `json:"pod,omitempty"`
	Container string   `json:"container,omitempty"`
	Spec      *PodSpec `json:"spec,omitempty"`
	// Code is a crash's exit code.
	Code int32 `json:"code,omitempty"`
	// RemoveFirst: the GC removes the crashed instance before the
	// kubelet re-creates it.
	RemoveFirst bool `json:"removeFirst,omitempty"`
	// Milli is a resize's new CPU request and limit.
	Milli int64 `json:"milli,omitempty"`
}

func (a Action) String() string {
	switch a.Op {
	case OpStart:
		var cs []string
		for _, c := range a.Spec.Containers {
			cs = append(cs, fmt.Sprintf("%s:%s=%dm", c.Kind, c.Name, c.Milli))
		}
		extra := ""
		if a.Spec.Job {
			extra += " job"
		}
		if a.Spec.OverheadMilli > 0 {
			extra += fmt.Sprintf(" overhead=%dm", a.Spec.OverheadMilli)
		}
		if a.Spec.SidecarCrashesAtStart {
			extra += " sidecars-crash-at-start"
		}
		return fmt.Sprintf("start %s %s [%s]%s", a.Spec.QoS, a.Spec.Name, strings.Join(cs, " "), extra)
	case OpCrash:
		return fmt.Sprintf("crash %s/%s code=%d removeFirst=%v", a.Pod, a.Container, a.Code, a.RemoveFirst)
	case OpResize:
		return fmt.Sprintf("resize %s/%s to %dm", a.Pod, a.Container, a.Milli)
	case OpReboot, OpRestartContainerd, OpRestartPlugin, OpCollect:
		return a.Op
	}
	return a.Op + " " + a.Pod
}

// Life is a sequence of actions, as kept in testdata/lives.
type Life struct {
	// Name says where it comes from (a seed).
	Name string `json:"name"`
	// API: the plugin watches the Kubernetes API.
	API     bool     `json:"api"`
	Actions []Action `json:"actions"`
}

// LoadLife reads a kept life.
func LoadLife(path string) (*Life, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var l Life
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &l, nil
}

// Save writes a life as JSON.
func (l *Life) Save(path string) error {
	data, err := json.MarshalIndent(l, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// generator invents the next action from what runs.
type generator struct {
	rng  *rand.Rand
	next int
	// cpus is the node's allocatable CPUs: pods stay below it.
	cpus int
}

// podView is what the generator needs of a pod that exists.
type podView struct {
	spec      *PodSpec
	completed bool
	// exclusive are the app containers and sidecars that hold whole CPUs
	// and could be resized, with their current CPUs.
	exclusive map[string]int64
	// crashable are the containers that run.
	crashable []string
}

// next returns a random action for the pods that exist.
func (g *generator) action(pods map[string]*podView) Action {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range pods {
			if !yield(n) {
				return
			}
		}
	})
	var running, restartable, completed, jobs, resizable []string
	for _, n := range names {
		p := pods[n]
		if p.completed {
			completed = append(completed, n)
			continue
		}
		running = append(running, n)
		if p.spec.Job {
			jobs = append(jobs, n) // (restartPolicy: Never: a crash fails the pod, not played)
		} else {
			restartable = append(restartable, n)
		}
		if len(p.exclusive) > 0 {
			resizable = append(resizable, n)
		}
	}
	pick := func(list []string) string { return list[g.rng.IntN(len(list))] }
	for {
		switch k := g.rng.IntN(100); {
		case k < 30 || len(running) == 0:
			if len(names) < 8 {
				return Action{Op: OpStart, Spec: g.pod()}
			}
		case k < 45 && len(restartable) > 0:
			p := pods[pick(restartable)]
			if len(p.crashable) == 0 {
				continue
			}
			code := []int32{1, 137, 2}[g.rng.IntN(3)]
			return Action{Op: OpCrash, Pod: p.spec.Name, Container: p.crashable[g.rng.IntN(len(p.crashable))], Code: code, RemoveFirst: g.rng.IntN(2) == 0}
		case k < 52 && len(restartable) > 0:
			return Action{Op: OpRecreateSandbox, Pod: pick(restartable)}
		case k < 60:
			return Action{Op: OpCollect}
		case k < 65 && len(jobs) > 0:
			return Action{Op: OpComplete, Pod: pick(jobs)}
		case k < 75 && len(names) > 0:
			return Action{Op: OpDelete, Pod: pick(names)}
		case k < 88 && len(resizable) > 0:
			p := pods[pick(resizable)]
			cs := slices.Sorted(func(yield func(string) bool) {
				for n := range p.exclusive {
					if !yield(n) {
						return
					}
				}
			})
			c := cs[g.rng.IntN(len(cs))]
			cur := p.exclusive[c]
			n := max(1, cur/1000+int64(g.rng.IntN(5))-2)
			return Action{Op: OpResize, Pod: p.spec.Name, Container: c, Milli: n * 1000}
		case k < 91:
			return Action{Op: OpReboot}
		case k < 95:
			return Action{Op: OpRestartContainerd}
		default:
			return Action{Op: OpRestartPlugin}
		}
	}
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
		return int64(1+g.rng.IntN(3)) * 1000
	}
	for i := range g.rng.IntN(3) {
		s.Containers = append(s.Containers, ContainerSpec{Name: fmt.Sprintf("init%d", i), Kind: KindInit, Milli: cpus()})
	}
	if g.rng.IntN(3) == 0 {
		// A sidecar among the init containers.
		at := g.rng.IntN(len(s.Containers) + 1)
		s.Containers = slices.Insert(s.Containers, at, ContainerSpec{Name: "side", Kind: KindSidecar, Milli: cpus()})
		s.SidecarCrashesAtStart = g.rng.IntN(3) == 0
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
