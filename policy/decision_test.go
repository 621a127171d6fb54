package policy_test

import (
	"slices"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// TestDecisionUpdatesListTheSharedContainersOnce: a decision that changes
// the shared pool lists no update of the shared containers itself
// (PoolChanged says it); Updates lists one for each running shared
// container, on the decision's pool, in id order, after the decision's own
// updates and before its last ones, and none twice.
func TestDecisionUpdatesListTheSharedContainersOnce(t *testing.T) {
	pol := eightCPUs(t)
	m := createdRunning(t, pol, policy.NewModel(pol.NewState()), "burstable", 500, "0-7", "web-b", "web-a", "web-c")
	m = pol.StopContainer(m, running(t, "web-c", "burstable", 500, "0-7")).Model // (stopped: no update)
	d, err := pol.CreateContainer(m, running(t, "pinned", "guaranteed", 2000, "0-7"))
	if err != nil {
		t.Fatal(err)
	}
	if !d.PoolChanged || len(d.Others) != 0 {
		t.Fatalf("a pinned creation: PoolChanged %v, own updates %v; want the pool changed and no update listed", d.PoolChanged, d.Others)
	}
	pool := d.Model.State.DefaultCPUSet().String()
	explicit := func(id string) policy.Update {
		return policy.Update{ContainerID: id, CPUList: "1"}
	}
	tests := []struct {
		name        string
		others      []policy.Update
		last        []policy.Update
		poolChanged bool
		want        []string
	}{
		{"the shared containers, in id order", nil, nil, true, []string{"web-a", "web-b"}},
		{"own updates first, none twice", []policy.Update{explicit("web-b")}, nil, true, []string{"web-b", "web-a"}},
		{"last updates last, none twice", nil, []policy.Update{explicit("web-a")}, true, []string{"web-b", "web-a"}},
		{"the pool unchanged: own and last only", []policy.Update{explicit("x")}, []policy.Update{explicit("y")}, false, []string{"x", "y"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dd := d
			dd.Others, dd.Last, dd.PoolChanged = tc.others, tc.last, tc.poolChanged
			var ids []string
			for _, u := range dd.Updates() {
				ids = append(ids, u.ContainerID)
				explicitOne := slices.ContainsFunc(slices.Concat(tc.others, tc.last), func(e policy.Update) bool { return e.ContainerID == u.ContainerID })
				if !explicitOne && u.List() != pool {
					t.Errorf("%s: update to %s, want the decision's pool %s", u.ContainerID, u.List(), pool)
				}
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("updates of %v, want %v", ids, tc.want)
			}
		})
	}
}
