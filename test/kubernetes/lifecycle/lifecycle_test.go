package lifecycle

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/test/kubernetes/placement"
)

// The lives make test plays: seeds × steps, with and without the API.
const (
	seeds         = 6
	stepsPerSeed  = 400
	keptLivesGlob = "testdata/lives/*.json"
)

// reserved is the CPU both sides keep for the system.
var reserved = cpuset.New(0)

// machine is the node of the lives: 16 CPUs in 8 cores of 2 threads, one
// socket and NUMA node (topologyManagerPolicy none: where a container's
// CPUs are is the placement comparison's business, not this one's).
var machine = placement.MachineSpec{Name: "16 1s×1n×8c×2t",
	Spec: fakesysfs.Spec{Sockets: 1, NUMAPerSocket: 1, CoresPerNUMA: 8, ThreadsPerCore: 2, Numbering: fakesysfs.SiblingsOffset}}

// TestLifecycleMatchesTheKubelet plays random pod lives on the kubelet's
// CPU manager and on the plugin over NRI, with the plugin watching the
// Kubernetes API and without, and compares them after every action (the
// package comment says what). The lives kept in testdata/lives run first.
// LIFECYCLE_SEED=n plays only seed n; LIFECYCLE_KEEP=1 keeps a failing
// life in testdata/lives.
func TestLifecycleMatchesTheKubelet(t *testing.T) {
	m, err := placement.NewMachine(machine)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := filepath.Glob(keptLivesGlob)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range kept {
		life, err := LoadLife(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(path), func(t *testing.T) { replay(t, m, life) })
	}
	if os.Getenv("LIFECYCLE_TRACE") != "" {
		Trace = t.Logf
	}
	first, last := uint64(1), uint64(seeds)
	if s := os.Getenv("LIFECYCLE_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LIFECYCLE_SEED=%q: %v", s, err)
		}
		first, last = n, n
	}
	var total Stats
	for seed := first; seed <= last; seed++ {
		for _, withAPI := range []bool{true, false} {
			name := fmt.Sprintf("seed=%d/api=%v", seed, withAPI)
			t.Run(name, func(t *testing.T) {
				stats := generate(t, m, seed, withAPI)
				total.Actions += stats.Actions
				total.Compared += stats.Compared
				total.Rejected += stats.Rejected
				total.Refused += stats.Refused
				total.KubeletReusedLess += stats.KubeletReusedLess
				if total.Ops == nil {
					total.Ops = map[string]int{}
				}
				for op, n := range stats.Ops {
					total.Ops[op] += n
				}
			})
		}
	}
	t.Logf("%d actions (%v), compared after each; the kubelet refused %d pods, the plugin %d resizes; the kubelet's pool was smaller than its pods' totals say %d times (its weaker reuse of init containers' CPUs)",
		total.Actions, total.Ops, total.Rejected, total.Refused, total.KubeletReusedLess)
}

// generate plays a random life of stepsPerSeed actions and keeps it when
// it fails and LIFECYCLE_KEEP is set.
func generate(t *testing.T, m *placement.Machine, seed uint64, withAPI bool) Stats {
	o := newOracle(t, m, withAPI)
	g := &generator{rng: rand.New(rand.NewPCG(seed, 1287)), cpus: m.Ours.CPUs().Size() - reserved.Size()}
	life := &Life{Name: fmt.Sprintf("seed %d", seed), API: withAPI}
	for step := 0; step < stepsPerSeed; step++ {
		a := g.action(o.views())
		life.Actions = append(life.Actions, a)
		if err := o.Play(a); err != nil {
			keep(t, life)
			t.Fatalf("step %d: %s: %v\nreplay: LIFECYCLE_SEED=%d go test -run 'TestLifecycleMatchesTheKubelet/seed=%d/api=%v' ./lifecycle/",
				step, a, err, seed, seed, withAPI)
		}
	}
	return o.Stats
}

// replay plays a kept life.
func replay(t *testing.T, m *placement.Machine, life *Life) {
	o := newOracle(t, m, life.API)
	for step, a := range life.Actions {
		if err := o.Play(a); err != nil {
			t.Fatalf("%s, step %d: %s: %v", life.Name, step, a, err)
		}
	}
}

// keep writes a failing life to testdata/lives when LIFECYCLE_KEEP is set.
func keep(t *testing.T, life *Life) {
	if os.Getenv("LIFECYCLE_KEEP") == "" {
		return
	}
	dir := filepath.Join("testdata", "lives")
	path := filepath.Join(dir, sanitize(fmt.Sprintf("%s-api-%v-%d-actions.json", life.Name, life.API, len(life.Actions))))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("keeping the life: %v", err)
		return
	}
	if err := life.Save(path); err != nil {
		t.Errorf("keeping the life: %v", err)
		return
	}
	t.Logf("kept as %s", path)
}

func sanitize(name string) string {
	out := []rune(name)
	for i, r := range out {
		if r == '=' || r == '/' || r == ' ' {
			out[i] = '-'
		}
	}
	return string(out)
}

// newOracle builds both sides on machine m.
func newOracle(t *testing.T, m *placement.Machine, withAPI bool) *Oracle {
	kubelet, err := NewKubelet(m.Kubelet, reserved)
	if err != nil {
		t.Fatal(err)
	}
	alloc, err := cpuallocator.NewAllocator(m.Ours, cpuallocator.StaticPolicyOptions{}, cpuallocator.TopologyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clock := &Clock{now: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	pol, err := policy.New(alloc, policy.Options{Reserved: reserved, InPlaceResize: true, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return NewOracle(t, kubelet, NewNode(t, pol, withAPI), clock)
}

// TestMain quiets the NRI runtime library's log (logrus' standard
// logger), which would drown the comparison's own report.
func TestMain(m *testing.M) {
	logrus.StandardLogger().SetOutput(io.Discard)
	os.Exit(m.Run())
}
