package state

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/utils/cpuset"
)

// commitNode describes the node of a commit benchmark: cpus online CPUs
// and containers exclusive containers, each in its own block of block
// CPUs, with orig CPUs at creation and extra more once grown. Half the
// containers start grown.
type commitNode struct {
	cpus, containers, block, orig, extra int
}

// commitNodes are the nodes BenchmarkCommit measures: a big node and the
// largest the project tests.
var commitNodes = []commitNode{
	{cpus: 512, containers: 250, block: 2, orig: 1, extra: 1},
	{cpus: 4096, containers: 500, block: 8, orig: 4, extra: 2},
}

func (n commitNode) String() string {
	return fmt.Sprintf("cpus=%d/containers=%d", n.cpus, n.containers)
}

func (n commitNode) podUID(i int) string { return fmt.Sprintf("5f0c8a4e-1b2d-4c3e-9f00-%012d", i) }

// assignment returns container i's assignment, grown or not.
func (n commitNode) assignment(i int, grown bool) Assignment {
	first := i * n.block
	a := Assignment{Baseline: cpuset.New(makeRange(first, first+n.orig-1)...)}
	if grown {
		a.Resized = cpuset.New(makeRange(first, first+n.orig+n.extra-1)...)
	}
	return a
}

// state returns the node's state before any commit: even containers
// grown, the shared pool every CPU no container holds.
func (n commitNode) state() *State {
	online := cpuset.New(makeRange(0, n.cpus-1)...)
	s := New(cpuset.New())
	exclusive := cpuset.New()
	for i := range n.containers {
		pod := n.podUID(i)
		a := n.assignment(i, i%2 == 0)
		exclusive = exclusive.Union(a.Assigned())
		s.SetAssignment(pod, "app", a)
		s.SetContainer(fmt.Sprintf("%064x", i), ContainerRef{PodUID: pod, Name: "app"})
		s.SetPodResources(pod, PodRecord{
			Resources: ResourceRecord{CPUShares: 4096, CPUQuota: 400000, CPUPeriod: 100000, MemoryLimit: 1 << 30},
		})
	}
	s.SetDefaultCPUSet(online.Difference(exclusive))
	return s
}

// resize returns a copy of s in which container i is shrunk back to its
// original CPUs if it is grown, grown otherwise, and the shared pool
// gives or takes the extra CPUs: one commit of the plugin.
func (n commitNode) resize(s *State, i int) *State {
	next := s.Clone()
	pod := n.podUID(i)
	a, _ := next.Assignment(pod, "app")
	grown := a.Assigned().Size() > n.orig
	b := n.assignment(i, true)
	extra := b.Resized.Difference(b.Baseline)
	if grown {
		b.Resized = b.Baseline
		next.SetDefaultCPUSet(next.DefaultCPUSet().Union(extra))
	} else {
		next.SetDefaultCPUSet(next.DefaultCPUSet().Difference(extra))
	}
	next.SetAssignment(pod, "app", b)
	return next
}

// BenchmarkCommit measures Store.Save of a state that differs from the
// one saved before by one container's resize and the shared pool, which
// is what the plugin commits before each reply. Only Save is timed; the
// p50-ns and p99-ns metrics are those of the Saves.
func BenchmarkCommit(b *testing.B) {
	for _, node := range commitNodes {
		b.Run(node.String(), func(b *testing.B) {
			st, err := NewStore(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				if err := st.Close(); err != nil {
					b.Error(err)
				}
			}()
			s := node.state()
			if err := st.Save(s); err != nil {
				b.Fatal(err)
			}
			var l []time.Duration
			i := 0
			for b.Loop() {
				s = node.resize(s, i%node.containers)
				start := time.Now()
				err := st.Save(s)
				l = append(l, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				i++
			}
			slices.Sort(l)
			b.ReportMetric(float64(l[len(l)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(l[min(len(l)-1, len(l)*99/100)].Nanoseconds()), "p99-ns")
		})
	}
}
