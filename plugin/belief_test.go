package plugin

import (
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// TestJudgeReads plays cgroup reads against what the plugin handed the
// runtime: a cpuset still in transit is no drift until its replacement has
// surely landed (a later event for a reply's updates of other containers,
// PostUpdateContainer for a resize's target, two periodic reads), one the
// plugin never handed is drift at once.
func TestJudgeReads(t *testing.T) {
	old, next, other := mask(0, 1, 2, 3), mask(0, 3), mask(0, 1)
	type read struct {
		cpus     cpumask.Mask
		seq      uint64
		periodic bool
		want     readVerdict
	}
	tests := []struct {
		name  string
		kind  handKind
		post  bool // PostUpdateContainer confirmed the target
		reads []read
	}{
		{"reply: the new cpuset", handedInReply, false, []read{{next, 5, false, readMatches}}},
		{"reply: the old one before the next event", handedInReply, false, []read{{old, 5, false, readStale}, {next, 5, false, readMatches}}},
		{"reply: the old one after the next event", handedInReply, false, []read{{old, 5, false, readStale}, {old, 6, false, readDrift}}},
		{"reply: one never handed", handedInReply, false, []read{{other, 5, false, readDrift}}},
		{"target: the old one after later events", handedAsTarget, false, []read{{old, 9, false, readStale}, {old, 12, false, readStale}}},
		{"target: the old one after PostUpdateContainer", handedAsTarget, true, []read{{old, 6, false, readDrift}}},
		{"target: two periodic reads of the old one", handedAsTarget, false, []read{{old, 6, true, readStale}, {old, 7, true, readDrift}}},
		{"unsolicited in flight: the old one", handedUnsolicited, false, []read{{old, 9, false, readStale}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := &runtimeView{}
			v.set(old)
			v.hand(next, tc.kind, 5)
			if tc.post {
				v.confirm()
			}
			for i, r := range tc.reads {
				if got := v.judge(r.cpus, r.seq, r.periodic); got != r.want {
					t.Fatalf("read %d of %s (seq %d, periodic %v): verdict %d, want %d", i, r.cpus, r.seq, r.periodic, got, r.want)
				}
			}
		})
	}
}

// TestReplyDuringAnUnsolicitedUpdateIsNotConfirmedByEvents: a reply that
// changes a container while an unsolicited update to it is in flight may
// land before or after that update, so a later event does not make the
// update's cpuset drift.
func TestReplyDuringAnUnsolicitedUpdateIsNotConfirmedByEvents(t *testing.T) {
	before, sent, replied := mask(0, 1), mask(0, 1, 2, 3), mask(0, 1, 3)
	v := &runtimeView{}
	v.set(before)
	v.hand(sent, handedUnsolicited, 1) // in flight until it returns
	v.hand(replied, handedInReply, 2)
	v.inFlight = false // the update returned
	if got := v.judge(sent, 10, false); got != readStale {
		t.Errorf("the unsolicited update's cpuset after later events: verdict %d, want stale", got)
	}
	if got := v.judge(replied, 10, false); got != readMatches {
		t.Errorf("the reply's cpuset: verdict %d, want a match", got)
	}
}

// TestTransitStaysShort: a container the plugin hands cpusets to again and
// again without a cgroup read (verification off) keeps a short list of
// what the runtime may still show: a reply's cpuset is applied once a
// later event comes, and the list is bounded anyway.
func TestTransitStaysShort(t *testing.T) {
	v := &runtimeView{}
	v.set(mask(0))
	for i := 1; i <= 100; i++ {
		v.hand(mask(0, i), handedInReply, uint64(i))
	}
	if len(v.transit) != 1 {
		t.Errorf("after 100 replies, %d cpusets in transit, want 1", len(v.transit))
	}
	for i := 1; i <= 100; i++ {
		v.hand(mask(1, i), handedAsTarget, 100)
	}
	if len(v.transit) > maxTransit {
		t.Errorf("after 100 targets, %d cpusets in transit, want at most %d", len(v.transit), maxTransit)
	}
}

// mask is the bitmap of the given CPUs.
func mask(ids ...int) cpumask.Mask {
	var m cpumask.Mask
	for _, id := range ids {
		m.Add(id)
	}
	return m
}
