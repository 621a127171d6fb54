package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

// machines are the fixtures compared, 64 to 512 CPUs. Thread siblings are
// numbered as on most x86 servers (core k = {k, k+cores}).
var machines = []MachineSpec{
	{Name: "64 2s×2n×8c×2t", Spec: fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 2, CoresPerNUMA: 8, ThreadsPerCore: 2, Numbering: fakesysfs.SiblingsOffset}},
	{Name: "64 EPYC-7313 NPS2 2L3/n", Layout: "amd-epyc-7313-2s-nps2"},
	{Name: "128 2s×4n×8c×2t 2L3/n", Spec: fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 4, CoresPerNUMA: 8, ThreadsPerCore: 2, L3PerNUMA: 2, Numbering: fakesysfs.SiblingsOffset}},
	{Name: "128 Xeon-6338 SNC2", Layout: "intel-xeon-gold-6338-snc2"},
	{Name: "256 2s×4n×16c×2t", Spec: fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 4, CoresPerNUMA: 16, ThreadsPerCore: 2, Numbering: fakesysfs.SiblingsOffset}},
	{Name: "512 2s×4n×32c×2t", Spec: fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 4, CoresPerNUMA: 32, ThreadsPerCore: 2, Numbering: fakesysfs.SiblingsOffset}},
}

// policyOptions are the static policy options both sides support, one at a
// time.
var policyOptions = []string{
	"none",
	"full-pcpus-only",
	"distribute-cpus-across-numa",
	"align-by-socket",
	"distribute-cpus-across-cores",
	"prefer-align-cpus-by-uncorecache",
}

func optionMap(name string) map[string]string {
	if name == "none" {
		return nil
	}
	return map[string]string{name: "true"}
}

// decisionsPerWalk is the number of placements decided on each random
// walk; every (machine, option) pair walks twice, once following the
// kubelet's picks and once following the plugin's.
const decisionsPerWalk = 60

// step is one state both sides decide on.
type step struct {
	free     cpuset.CPUSet
	n        int
	affinity cpuallocator.NodeMask
}

// tally counts the outcomes of one (machine, option) pair.
type tally struct {
	decisions  int
	identical  int
	oursBetter int // ours better on one count, worse on none
	tradeOff   int // different, each better on some count
	violations int // ours worse on one count, better on none
	kubeletNo  int // the kubelet refused, the plugin placed
	steps      []step
	kubeletNs  float64
	oursNs     float64
}

// TestPlacementNeverWorseThanKubelet has the kubelet's static policy and
// the plugin's allocator decide the same random states on every machine
// with every option, fails on a plugin pick worse than the kubelet's on
// split cores, NUMA nodes or sockets and better on none (Shape.WorseThan)
// or on a request only the kubelet places, and logs the share of
// identical picks and the speed of both.
func TestPlacementNeverWorseThanKubelet(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.CPUManagerPolicyAlphaOptions, true)
	var report strings.Builder
	fmt.Fprintf(&report, "\n| machine | option | picks | identical | plugin better | trade-off | only plugin placed | kubelet µs | plugin µs | kubelet ÷ plugin |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for mi, ms := range machines {
		t.Run(ms.Name, func(t *testing.T) {
			m, err := NewMachine(ms)
			if err != nil {
				t.Fatal(err)
			}
			for oi, opt := range policyOptions {
				kube, err := NewKubelet(m, optionMap(opt))
				if err != nil {
					t.Fatal(err)
				}
				ours, err := NewOurs(m, optionMap(opt))
				if err != nil {
					t.Fatal(err)
				}
				var tl tally
				for walk := 0; walk < 2; walk++ {
					seed := uint64(mi*100 + oi*10 + walk)
					compareWalk(t, m, opt, kube, ours, walk == 0, seed, &tl)
				}
				tl.kubeletNs, tl.oursNs = speed(kube, ours, tl.steps)
				fmt.Fprintf(&report, "| %s | %s | %d | %.1f %% | %d | %d | %d | %.1f | %.1f | %.0f× |\n",
					ms.Name, opt, tl.decisions, 100*float64(tl.identical)/float64(tl.decisions),
					tl.oursBetter, tl.tradeOff, tl.kubeletNo, tl.kubeletNs/1e3, tl.oursNs/1e3, tl.kubeletNs/tl.oursNs)
				if tl.violations > 0 {
					t.Errorf("%s: %d of %d picks worse than the kubelet's", opt, tl.violations, tl.decisions)
				}
			}
		})
	}
	t.Log(report.String())
}

// compareWalk runs one random walk: random releases and requests from a
// fresh machine, both sides deciding every request on the same free CPUs,
// the walk taking the kubelet's pick (followKubelet) or the plugin's.
func compareWalk(t *testing.T, m *Machine, opt string, kube *Kubelet, ours *Ours, followKubelet bool, seed uint64, tl *tally) {
	t.Helper()
	w := newWalk(m.Ours.CPUs(), opt == "full-pcpus-only", seed)
	for range decisionsPerWalk {
		n := w.request()
		if n == 0 {
			return
		}
		var affinity cpuallocator.NodeMask
		if w.rng.IntN(3) == 0 {
			affinity = ours.Affinity(w.free, n)
		}
		st := step{free: w.free, n: n, affinity: affinity}
		kPick, kErr := kube.Decide(st.free, n, affinity)
		oPick, oErr := ours.Decide(st.free, n, affinity)
		switch {
		case kErr != nil && oErr != nil:
			w.release()
			continue
		case oErr != nil:
			t.Errorf("%s: the plugin refused what the kubelet placed: %s", opt, describe(m, opt, st, kPick, oPick))
			t.Errorf("    plugin: %v", oErr)
			w.take(kPick)
			continue
		case kErr != nil:
			tl.kubeletNo++
			w.take(oPick)
			continue
		}
		if oPick.Size() != n || !oPick.IsSubsetOf(st.free) {
			t.Fatalf("%s: the plugin picked %s for %d CPUs out of %s", opt, oPick, n, st.free)
		}
		tl.decisions++
		tl.steps = append(tl.steps, st)
		ks, os := m.ShapeOf(kPick, opt), m.ShapeOf(oPick, opt)
		switch {
		case kPick.Equals(oPick):
			tl.identical++
		case os.WorseThan(ks):
			tl.violations++
			t.Errorf("%s: pick worse than the kubelet's: %s", opt, describe(m, opt, st, kPick, oPick))
		case ks.WorseThan(os):
			tl.oursBetter++
		case ks == os: // different CPUs, same counts: no trade-off
		default:
			tl.tradeOff++
		}
		if followKubelet {
			w.take(kPick)
		} else {
			w.take(oPick)
		}
	}
}

func describe(m *Machine, opt string, st step, kPick, oPick cpuset.CPUSet) string {
	aff := "none"
	if st.affinity != 0 {
		aff = st.affinity.String()
	}
	return fmt.Sprintf("%d CPUs of free %s (affinity %s): kubelet %s (%s), plugin %s (%s)",
		st.n, st.free, aff, kPick, m.ShapeOf(kPick, opt), oPick, m.ShapeOf(oPick, opt))
}

// walk is a random sequence of container creations and removals on one
// machine.
type walk struct {
	rng   *rand.Rand
	all   int
	free  cpuset.CPUSet
	live  []cpuset.CPUSet
	group int
}

func newWalk(cpus cpuset.CPUSet, wholeCores bool, seed uint64) *walk {
	w := &walk{rng: rand.New(rand.NewPCG(seed, 0x706c6163656d656e)), all: cpus.Size(), free: cpus, group: 1}
	if wholeCores {
		w.group = 2
	}
	return w
}

// request removes some containers at random and returns the size of the
// next one: mostly small, sometimes up to a quarter of the machine; 0 when
// nothing fits.
func (w *walk) request() int {
	for len(w.live) > 0 && (w.rng.IntN(3) == 0 || w.free.Size() < w.all/8) {
		w.release()
	}
	var n int
	switch r := w.rng.IntN(10); {
	case r < 6:
		n = 1 + w.rng.IntN(4)
	case r < 9:
		n = 5 + w.rng.IntN(12)
	default:
		n = 17 + w.rng.IntN(max(w.all/4-16, 1))
	}
	n = (n + w.group - 1) / w.group * w.group
	for n > w.free.Size() && len(w.live) > 0 {
		w.release()
	}
	return min(n, w.free.Size()/w.group*w.group)
}

func (w *walk) take(cpus cpuset.CPUSet) {
	w.free = w.free.Difference(cpus)
	w.live = append(w.live, cpus)
}

func (w *walk) release() {
	if len(w.live) == 0 {
		return
	}
	i := w.rng.IntN(len(w.live))
	w.free = w.free.Union(w.live[i])
	w.live = append(w.live[:i], w.live[i+1:]...)
}

// speed times both sides deciding every step, in rounds that alternate
// between them so that both see the same load on a shared machine, and
// returns the median per-decision times. It is reported, never asserted.
func speed(kube *Kubelet, ours *Ours, steps []step) (kubeletNs, oursNs float64) {
	const rounds = 3
	var ks, os []float64
	for range rounds {
		ks = append(ks, nsPerDecision(kube.Decide, steps, 1))
		os = append(os, nsPerDecision(ours.Decide, steps, 10))
	}
	slices.Sort(ks)
	slices.Sort(os)
	return ks[rounds/2], os[rounds/2]
}

// nsPerDecision times decide over all steps, passes times.
func nsPerDecision(decide func(cpuset.CPUSet, int, cpuallocator.NodeMask) (cpuset.CPUSet, error), steps []step, passes int) float64 {
	start := time.Now()
	for range passes {
		for _, st := range steps {
			_, _ = decide(st.free, st.n, st.affinity)
		}
	}
	return float64(time.Since(start).Nanoseconds()) / float64(passes*len(steps))
}

// TestIssueExample is the case that started the rule: 512 CPUs, 2 CPUs
// requested, one whole free core on socket 1 and two halves of cores on
// socket 0 whose siblings others hold.
func TestIssueExample(t *testing.T) {
	m, err := NewMachine(machines[len(machines)-1])
	if err != nil {
		t.Fatal(err)
	}
	kube, err := NewKubelet(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := NewOurs(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	free, err := cpuset.Parse("19,23,128-255,384-511")
	if err != nil {
		t.Fatal(err)
	}
	kPick, err := kube.Decide(free, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := cpuset.New(128, 384); !kPick.Equals(want) {
		t.Fatalf("kubelet picked %s, the reference case says %s", kPick, want)
	}
	oPick, err := ours.Decide(free, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ks, os := m.ShapeOf(kPick, "none"), m.ShapeOf(oPick, "none"); os.WorseThan(ks) {
		t.Errorf("plugin picked %s (%s), worse than the kubelet's %s (%s)", oPick, os, kPick, ks)
	}
}

// BenchmarkDecide times each side deciding the states of one walk (the
// kubelet's picks followed) per machine and option, one decision per
// iteration: `go test -run '^$' -bench Decide ./placement/`.
func BenchmarkDecide(b *testing.B) {
	featuregatetesting.SetFeatureGateDuringTest(b, utilfeature.DefaultFeatureGate, features.CPUManagerPolicyAlphaOptions, true)
	for _, ms := range machines {
		b.Run(ms.Name, func(b *testing.B) {
			m, err := NewMachine(ms)
			if err != nil {
				b.Fatal(err)
			}
			for _, opt := range policyOptions {
				b.Run(opt, func(b *testing.B) {
					kube, err := NewKubelet(m, optionMap(opt))
					if err != nil {
						b.Fatal(err)
					}
					ours, err := NewOurs(m, optionMap(opt))
					if err != nil {
						b.Fatal(err)
					}
					steps := walkSteps(kube, ours, m, opt == "full-pcpus-only")
					for _, side := range []struct {
						name   string
						decide func(cpuset.CPUSet, int, cpuallocator.NodeMask) (cpuset.CPUSet, error)
					}{{"kubelet", kube.Decide}, {"plugin", ours.Decide}} {
						b.Run(side.name, func(b *testing.B) {
							for i := 0; b.Loop(); i++ {
								st := steps[i%len(steps)]
								_, _ = side.decide(st.free, st.n, st.affinity)
							}
						})
					}
				})
			}
		})
	}
}

// walkSteps records the states of one random walk that follows the
// kubelet's picks.
func walkSteps(kube *Kubelet, ours *Ours, m *Machine, wholeCores bool) []step {
	w := newWalk(m.Ours.CPUs(), wholeCores, 1)
	var steps []step
	for range decisionsPerWalk {
		n := w.request()
		if n == 0 {
			break
		}
		var affinity cpuallocator.NodeMask
		if w.rng.IntN(3) == 0 {
			affinity = ours.Affinity(w.free, n)
		}
		pick, err := kube.Decide(w.free, n, affinity)
		if err != nil {
			w.release()
			continue
		}
		steps = append(steps, step{free: w.free, n: n, affinity: affinity})
		w.take(pick)
	}
	return steps
}
