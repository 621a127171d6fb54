package plugin

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// testLedger returns a ledger with a clock of the test's.
func testLedger(now *time.Time) *ledger {
	l := newLedger()
	l.now = func() time.Time { return *now }
	return l
}

func upd(id string, cpus ...int) policy.Update {
	return policy.Update{ContainerID: id, CPUs: mask(cpus...)}
}

// TestLedgerSendDue: pending updates go out SendDelay after the last event,
// SendMaxDelay after they became pending at the latest, and not before
// SendMaxDelay after an event whose reply the runtime may be applying.
func TestLedgerSendDue(t *testing.T) {
	const delay, maxDelay = time.Second, 5 * time.Second
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		play func(l *ledger, now *time.Time)
		due  time.Duration // after t0; -1: nothing due
	}{
		{"nothing pending", func(l *ledger, _ *time.Time) { l.event() }, -1},
		{"quiet after the last event", func(l *ledger, now *time.Time) {
			l.event()
			l.setPending("a")
			*now = t0.Add(2 * time.Second)
			l.event()
		}, 3 * time.Second},
		{"events keep coming: the max delay", func(l *ledger, now *time.Time) {
			l.setPending("a")
			for range 10 {
				*now = now.Add(900 * time.Millisecond)
				l.event()
			}
		}, maxDelay},
		{"a reply in flight", func(l *ledger, now *time.Time) {
			l.setPending("a")
			*now = t0.Add(time.Second)
			l.event()
			l.handed(upd("b", 1), handedInReply)
		}, time.Second + maxDelay},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := t0
			l := testLedger(&now)
			tc.play(l, &now)
			due, any := l.sendDue(delay, maxDelay)
			if tc.due < 0 {
				if any {
					t.Errorf("due at %s, want nothing due", due)
				}
				return
			}
			if !any || !due.Equal(t0.Add(tc.due)) {
				t.Errorf("due %v at %s, want at t0+%s", any, due.Sub(t0), tc.due)
			}
		})
	}
}

// TestLedgerUnsolicitedSend: an unsolicited update takes its containers
// off the pending list; what failed, and what a reply changed meanwhile to
// something else, is due again; what landed is confirmed; a container
// removed meanwhile is forgotten.
func TestLedgerUnsolicitedSend(t *testing.T) {
	now := time.Now()
	l := testLedger(&now)
	for _, id := range []string{"ok", "failed", "raced", "gone"} {
		l.handed(upd(id, 1), handedInReply)
		l.setPending(id)
	}
	l.event()
	batch := l.startSend([]policy.Update{upd("ok", 2), upd("failed", 2), upd("raced", 2), upd("gone", 2)})
	if len(l.pending) != 0 || l.sendDone == nil {
		t.Fatalf("after startSend: pending %v, sendDone %v", l.pending, l.sendDone)
	}
	done := l.sendDone
	// A reply hands "raced" another cpuset while the update is in flight.
	l.event()
	l.handed(upd("raced", 3), handedInReply)
	again := l.finishSend(batch, map[string]bool{"failed": true}, nil, func(id string) bool { return id != "gone" })
	slices.Sort(again)
	if !slices.Equal(again, []string{"failed", "raced"}) {
		t.Errorf("due again %v, want [failed raced]", again)
	}
	select {
	case <-done:
	default:
		t.Error("sendDone not closed")
	}
	if got := l.appliedTo("failed"); !got.Equal(mask(1)) {
		t.Errorf("failed runs on %s in the ledger, want its earlier 1", got)
	}
	if v := l.views["ok"]; !v.known || !v.applied.Equal(mask(2)) || len(v.transit) != 0 {
		t.Errorf("ok: %+v, want 2 confirmed", v)
	}
	// A failure of the whole call: everything is due again.
	l.setPending("ok")
	batch = l.startSend([]policy.Update{upd("ok", 3)})
	if again := l.finishSend(batch, nil, errors.New("connection closed"), func(string) bool { return true }); !slices.Equal(again, []string{"ok"}) {
		t.Errorf("after a failed call: due again %v, want [ok]", again)
	}
}

// TestLedgerProbesAndReads: after an event only the containers handed a
// cpuset since their last read (or due, or named) are read; a read of an
// older cpuset whose replacement may not have landed is read again, one
// the ledger never handed is drift.
func TestLedgerProbesAndReads(t *testing.T) {
	now := time.Now()
	l := testLedger(&now)
	for _, id := range []string{"a", "b", "c"} {
		l.synced(id, "/"+id, true, false, mask(1))
	}
	ids := []string{"a", "b", "c", "nocgroup"}
	l.view("nocgroup")
	probesOf := func(all bool, named string) []string {
		probes, _ := l.probes(nil, "/sys/fs/cgroup", ids, all, func(id string) bool { return id == named })
		var out []string
		for _, pr := range probes {
			out = append(out, pr.id)
		}
		return out
	}
	if got := probesOf(true, ""); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("periodic pass reads %v, want a b c", got)
	}
	probes, seq := l.probes(nil, "/sys/fs/cgroup", ids, true, func(string) bool { return false })
	for _, pr := range probes {
		if got := l.judgeRead(pr, mask(1), seq, true); got != readConsistent {
			t.Errorf("%s read as handed: %v, want consistent", pr.id, got)
		}
	}
	if got := probesOf(false, ""); len(got) != 0 {
		t.Errorf("after an event with nothing handed, reads %v, want none", got)
	}
	l.event()
	l.handed(upd("a", 2), handedInReply)
	if got := probesOf(false, "c"); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("after a reply to a and c named, reads %v, want a c", got)
	}
	probes, seq = l.probes(nil, "/sys/fs/cgroup", []string{"a"}, false, func(string) bool { return false })
	if got := l.judgeRead(probes[0], mask(1), seq, false); got != readAgain {
		t.Errorf("a read on its earlier cpuset before the reply is known applied: %v, want read again", got)
	}
	probes, seq = l.probes(nil, "/sys/fs/cgroup", []string{"b"}, true, func(string) bool { return false })
	if got := l.judgeRead(probes[0], mask(3), seq, true); got != readDrifted || !l.appliedTo("b").Equal(mask(3)) {
		t.Errorf("b read on a cpuset never handed: %v, ledger %s; want drifted, 3", got, l.appliedTo("b"))
	}
}

// TestLedgerForgetsRemovedContainers: what the ledger kept of containers
// the model no longer tracks goes, pending ones included.
func TestLedgerForgetsRemovedContainers(t *testing.T) {
	now := time.Now()
	l := testLedger(&now)
	for _, id := range []string{"kept", "gone"} {
		l.handed(upd(id, 1), handedInReply)
		l.setPending(id)
	}
	l.forgetNotIn(func(id string) bool { return id == "kept" })
	if _, ok := l.views["gone"]; ok || l.pending["gone"] || !l.pending["kept"] || l.views["kept"] == nil {
		t.Errorf("views %v, pending %v; want only kept", l.views, l.pending)
	}
}

// TestLedgerReplyCarriesWhatAnUpdateInFlightShrinks: while an unsolicited
// update is in flight (a pod's admission shrank the shared containers), a
// reply that hands out CPUs carries those containers' current cpusets
// too: containerd may act on the reply before it applies the update. Once
// the update returned, replies carry no more than their own.
func TestLedgerReplyCarriesWhatAnUpdateInFlightShrinks(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	l := testLedger(&now)
	l.handed(upd("shared", 0, 1, 2, 3), handedInReply)
	l.event()
	batch := l.startSend([]policy.Update{upd("shared", 0, 1)})
	desired := func(ids []string) ([]policy.Update, []string) {
		var out []policy.Update
		for _, id := range ids {
			out = append(out, upd(id, 0, 1))
		}
		return out, nil
	}
	o := outcome{container: policy.Container{ID: "new"}, decision: policy.Decision{Target: &policy.Update{ContainerID: "new", CPUs: mask(2, 3)}}}
	got := l.reply(o, desired)
	if len(got) != 1 || got[0].ContainerID != "shared" || got[0].CPUs.String() != "0-1" {
		t.Errorf("reply while the update is in flight: %+v, want the shared container on 0-1", got)
	}
	l.finishSend(batch, nil, nil, func(string) bool { return true })
	if got := l.reply(o, desired); len(got) != 0 {
		t.Errorf("reply once the update returned: %+v, want none", got)
	}
}

// TestLedgerReplyLeavesOutTheEventsOwnContainer: a pod admitted at a
// shared container's creation shrinks the shared containers, the new one
// among them in the decision's updates; the runtime refuses a reply that
// updates the container it is creating ("asked update of ... during
// creation"), so the reply names only the others.
func TestLedgerReplyLeavesOutTheEventsOwnContainer(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	l := testLedger(&now)
	others := []policy.Update{upd("shared", 0, 1), upd("new", 0, 1)}
	o := outcome{container: policy.Container{ID: "new"}, decision: policy.Decision{Others: others}}
	got := l.reply(o, func([]string) ([]policy.Update, []string) { return nil, nil })
	if len(got) != 1 || got[0].ContainerID != "shared" {
		t.Errorf("reply %+v, want the shared container's update only", got)
	}
	if len(o.decision.Others) != 2 || o.decision.Others[1].ContainerID != "new" {
		t.Errorf("the decision's updates changed: %+v", o.decision.Others)
	}
}

// TestLedgerProbesNameCpusetFiles: a probe names the container's cpuset
// file in the hierarchy of its pass, in either driver's form, follows a
// new cgroups path (a Synchronize's) and another hierarchy, and carries
// the error of a path that leaves the cgroup tree.
func TestLedgerProbesNameCpusetFiles(t *testing.T) {
	now := time.Now()
	l := testLedger(&now)
	l.synced("a", "/kubepods/pod1/a", true, false, mask(1))
	l.synced("b", "kubepods-pod2.slice:cri-containerd:b", true, false, mask(1))
	l.synced("bad", "/kubepods/../../etc", true, false, mask(1))
	files := func(hierarchy string) map[string]string {
		t.Helper()
		probes, _ := l.probes(nil, hierarchy, []string{"a", "b", "bad"}, true, func(string) bool { return false })
		got := map[string]string{}
		for _, pr := range probes {
			got[pr.id] = pr.file
			if pr.fileErr != nil {
				got[pr.id] = "error: " + pr.fileErr.Error()
			}
		}
		return got
	}
	bad := `error: cgroups path "/kubepods/../../etc" leaves the cgroup tree`
	want := map[string]string{
		"a":   "/sys/fs/cgroup/cpuset/kubepods/pod1/a/cpuset.cpus",
		"b":   "/sys/fs/cgroup/cpuset/kubepods.slice/kubepods-pod2.slice/cri-containerd-b.scope/cpuset.cpus",
		"bad": bad,
	}
	for range 2 { // the second pass from what the views found
		if got := files("/sys/fs/cgroup/cpuset"); !maps.Equal(got, want) {
			t.Fatalf("files: %v, want %v", got, want)
		}
	}
	l.synced("a", "/kubepods/pod1/a2", true, false, mask(1))
	want = map[string]string{
		"a":   "/sys/fs/cgroup/kubepods/pod1/a2/cpuset.cpus",
		"b":   "/sys/fs/cgroup/kubepods.slice/kubepods-pod2.slice/cri-containerd-b.scope/cpuset.cpus",
		"bad": bad,
	}
	if got := files("/sys/fs/cgroup"); !maps.Equal(got, want) {
		t.Fatalf("after a new path and another hierarchy: %v, want %v", got, want)
	}
}

// TestShrinksFirstKeepsEachGroupsOrder: the updates that only take CPUs
// away come first, then the others, each group in the order given.
func TestShrinksFirstKeepsEachGroupsOrder(t *testing.T) {
	now := time.Now()
	l := testLedger(&now)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		l.synced(id, "/"+id, true, false, mask(1, 2))
	}
	// b and d shrink to CPU 1; a, c and e grow to 3; f is not known.
	in := []policy.Update{upd("a", 3), upd("b", 1), upd("c", 3), upd("f", 1), upd("d", 1), upd("e", 3)}
	var got []string
	for _, u := range l.shrinksFirst(in) {
		got = append(got, u.ContainerID)
	}
	if want := []string{"b", "d", "a", "c", "f", "e"}; !slices.Equal(got, want) {
		t.Fatalf("shrinksFirst: %v, want %v", got, want)
	}
}
