package integration

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	validator "github.com/containerd/nri/plugins/default-validator"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/state"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
)

// TestSIGKILLMidRequest kills the plugin's command (its own process) with
// SIGKILL while the runtime sends it requests, at random moments (many in
// the middle of a request), restarts it on the same state directory and
// checks, after every restart:
//   - no CPU was ever in two exclusive cpusets, nor in an exclusive and a
//     shared one (the runtime checks after every update it applies);
//   - every pinned container still holds the baseline CPUs the checkpoint
//     gave it before the kill, in the checkpoint and in its cpuset;
//   - after the new plugin's Synchronize, the runtime runs what the
//     checkpoint says (waitForState).
//
// Two runtimes are played: one that honours the plugin's failure policy
// (NRI v0.12.5: a request the dying plugin did not answer fails) and
// requires the plugin for container creation (the default validator's
// required_plugins, as a node that fails closed is configured), where the
// invariant is checked throughout; and one that ignores failure policies
// (containerd 2.4.2, NRI v0.12.3: the request goes on without the plugin,
// a container it creates runs on every CPU until the plugin is back), where
// the check pauses from the kill to the new Synchronize.
func TestSIGKILLMidRequest(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		ignoresFailurePolicies bool
		seed                   uint64
	}{
		{"failure policy honoured", false, 1},
		{"failure policy ignored (NRI v0.12.3)", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sigkillRun(t, tc.ignoresFailurePolicies, tc.seed, 40)
		})
	}
}

func sigkillRun(t *testing.T, ignoresFailurePolicies bool, seed uint64, kills int) {
	spec := fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 2, CoresPerNUMA: 8, ThreadsPerCore: 2}
	online := cpusOf(t, spec)
	var options []adaptation.Option
	if !ignoresFailurePolicies {
		options = append(options, adaptation.WithDefaultValidator(&validator.DefaultValidatorConfig{
			Enable: true, RequiredPlugins: []string{"cpumanager"}}))
	}
	rt := fakeruntime.NewWith(t, online, options...)
	rt.SetCgroupRoot(memDir(t), false)
	rt.SetIgnoresFailurePolicies(ignoresFailurePolicies)
	pc := processConfig{sysfsRoot: sysfsTree(t, spec), stateDir: t.TempDir(), yaml: "reservedSystemCPUs: \"0-1\""}
	pp := startProcess(t, rt, pc)
	rnd := rand.New(rand.NewPCG(seed, 7))

	next := 0
	op := func() error {
		pods := podsByUID(rt)
		switch k := rnd.IntN(10); {
		case k < 4 || len(pods) < 4:
			next++
			qos := []string{"guaranteed", "guaranteed", "burstable"}[rnd.IntN(3)]
			sb, err := rt.RunPod(policyPod(t, fmt.Sprintf("p%d", next), qos))
			if err != nil {
				return err
			}
			cpus := int64(1 + rnd.IntN(4))
			_, err = rt.CreateContainer(sb, "app", resourcesFor(qos, cpus))
			return err
		case k < 8:
			var pinned []*api.Container
			for _, c := range rt.Running() {
				if rt.PodOf(c).GetLinux().GetCgroupParent() != "" && rt.Exclusive(c) {
					pinned = append(pinned, c)
				}
			}
			if len(pinned) == 0 {
				return nil
			}
			c := pinned[rnd.IntN(len(pinned))]
			return rt.UpdateContainer(c, guaranteed(int64(1+rnd.IntN(6))))
		default:
			uids := slices.Sorted(maps.Keys(pods))
			return rt.RemovePod(pods[uids[rnd.IntN(len(uids))]])
		}
	}

	// How long a request takes here, to kill within one.
	var took []time.Duration
	for i := 0; i < 20; i++ {
		start := time.Now()
		_ = op() // refusals are fine
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	window := 2 * took[len(took)/2]

	midRequest := 0
	for kill := 0; kill < kills; kill++ {
		// A few requests with the plugin up, then one it dies in.
		for i := rnd.IntN(4); i > 0; i-- {
			_ = op()
		}
		noViolations(t, rt)
		before := originals(t, pc.stateDir, online)
		delay := time.Duration(rnd.Int64N(int64(window) + 1))
		done := make(chan error, 1)
		go func() { done <- op() }()
		time.Sleep(delay)
		if ignoresFailurePolicies {
			// What the runtime does without the plugin is not the
			// plugin's doing: the check resumes after its Synchronize.
			rt.SetChecking(false)
		}
		if rt.InRequest() {
			midRequest++
		}
		pp.Kill()
		err := <-done
		t.Logf("kill %d: the request in progress returned %v", kill, err)

		pp = startProcess(t, rt, pc)
		rt.SetChecking(true)
		waitForState(t, rt, pc.stateDir, online)
		noViolations(t, rt)
		after := originals(t, pc.stateDir, online)
		applied := rt.Applied()
		for ref, orig := range before {
			id, live := containerOf(rt, ref)
			if !live {
				continue // its pod was removed
			}
			if got, ok := after[ref]; !ok || !got.Equals(orig) {
				t.Errorf("kill %d: %s/%s had baseline CPUs %s before, %s (held: %v) after", kill, ref.PodUID, ref.Name, orig, got, ok)
			}
			if !orig.IsSubsetOf(applied[id]) {
				t.Errorf("kill %d: %s/%s runs on %s, without its baseline CPUs %s", kill, ref.PodUID, ref.Name, applied[id], orig)
			}
		}
		if t.Failed() {
			log := rt.Log()
			t.Logf("the last updates the runtime applied: %v", log[max(0, len(log)-30):])
			t.FailNow()
		}
	}
	t.Logf("%d kills, %d of them while the runtime waited for the plugin's answer", kills, midRequest)
	if midRequest == 0 {
		t.Errorf("no kill landed in the middle of a request: the test did not test what it says")
	}
}

// resourcesFor returns the kubelet's resources of a container of the QoS
// class asking for cpus CPUs.
func resourcesFor(qos string, cpus int64) policy.Resources {
	if qos == "guaranteed" {
		return guaranteed(cpus)
	}
	return burstable(cpus * 100)
}

// originals returns the baseline CPUs of every assignment on disk.
func originals(t *testing.T, dir string, online cpuset.CPUSet) map[state.ContainerRef]cpuset.CPUSet {
	t.Helper()
	out := map[state.ContainerRef]cpuset.CPUSet{}
	checkpointState(t, dir, online).ForEach(func(ref state.ContainerRef, a state.Assignment) { out[ref] = a.Baseline })
	return out
}

// podsByUID returns the runtime's pods by UID.
func podsByUID(rt *fakeruntime.Runtime) map[string]*api.PodSandbox {
	out := map[string]*api.PodSandbox{}
	for _, p := range rt.Pods() {
		out[p.Uid] = p
	}
	return out
}

// containerOf returns the id of the running container of a pod UID and
// name.
func containerOf(rt *fakeruntime.Runtime, ref state.ContainerRef) (string, bool) {
	for _, c := range rt.Running() {
		if c.Name == ref.Name && rt.PodOf(c).GetUid() == ref.PodUID {
			return c.Id, true
		}
	}
	return "", false
}
