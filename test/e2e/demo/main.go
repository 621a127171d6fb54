// Command demo shows nri-cpumanager on a real containerd on this machine:
// it starts a throwaway containerd 2.4.2 with NRI (installing what is
// missing), runs the plugin as an external NRI plugin, pins a Guaranteed
// pod, resizes it in place, shows the cpusets before and after and the
// refusals a user would read in `kubectl describe pod`, and cleans up.
//
// What can be shown for real depends on the CPUs of the machine: the
// shared pool keeps at least one CPU, so on 2 CPUs a pinned container holds
// one CPU and can neither grow nor shrink below it. The demo does for real
// what the machine allows, then replays KEP-5554's multi-container
// scenario on its 16-CPU example machine through the same policy code,
// labelled as simulated.
//
// Run it with `make demo` (as root).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cmd/nri-cpumanager/assemble"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
	"github.com/nri-cpumanager/nri-cpumanager/state"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

// demo holds what the steps share.
type demo struct {
	out      io.Writer
	step     int
	env      *harness.Env
	stateDir string
	online   cpuset.CPUSet
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.out, format+"\n", args...) }

// next prints the title of the next numbered step.
func (d *demo) next(format string, args ...any) {
	d.step++
	d.say("%d. "+format, append([]any{d.step}, args...)...)
}

func run(ctx context.Context, out io.Writer) (err error) {
	for _, check := range []func() error{harness.RequireRoot, harness.RequireCpusetCgroups} {
		if err := check(); err != nil {
			return fmt.Errorf("this machine cannot run the demo: %w", err)
		}
	}
	d := &demo{out: out}
	data, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return err
	}
	if d.online, err = cpuset.Parse(strings.TrimSpace(string(data))); err != nil {
		return err
	}

	d.say("== nri-cpumanager demo: %d CPUs online (%s)", d.online.Size(), d.online)
	d.say("== preparing containerd %s, runc and images (the first run installs and builds them)...", harness.ContainerdVersion)
	if d.env, err = harness.NewEnv(ctx, harness.EnvOptions{}); err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if cerr := d.env.Close(closeCtx); cerr != nil && err == nil {
			err = cerr
		}
		d.say("== cleaned up: pods, containerd and its temporary directory are gone")
	}()
	if err := d.startPlugin(ctx); err != nil {
		return err
	}
	if err := d.real(ctx); err != nil {
		return err
	}
	return d.simulated()
}

// startPlugin builds the plugin and runs it the DaemonSet way: an external
// plugin dialling containerd's NRI socket.
func (d *demo) startPlugin(ctx context.Context) error {
	bin, err := harness.GoBuild(ctx, "", "./cmd/nri-cpumanager")
	if err != nil {
		return err
	}
	dir := filepath.Join(d.env.Containerd.Dir(), "nri-cpumanager")
	d.stateDir = filepath.Join(dir, "state")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	config := filepath.Join(dir, "config.yaml")
	// No reserved CPU, so that a 2-CPU machine has one CPU to pin while
	// the shared pool keeps the other.
	text := fmt.Sprintf("nriSocket: %s\nstateDir: %s\nreservedSystemCPUs: \"\"\nmetricsAddress: \"\"\nhealthAddress: \"\"\nkubeletCheckpoint: \"\"\n",
		d.env.Containerd.NRISocket(), d.stateDir)
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		return err
	}
	p, err := d.env.StartPlugin(harness.ProcessOptions{Path: bin, Args: []string{"run", "--config", config}})
	if err != nil {
		return err
	}
	if _, err := p.WaitForLog(ctx, regexp.MustCompile(`msg=synchronized`)); err != nil {
		return err
	}
	d.say("== containerd runs with NRI; nri-cpumanager is connected (config %s, log %s)\n", config, p.LogPath())
	return nil
}

// cpus reads a container's cpuset where it lives: its cgroup, and the
// affinity of a process started inside it.
func (d *demo) cpus(ctx context.Context, c *harness.Container) string {
	set, err := c.CgroupCPUs(ctx)
	if err != nil {
		return "? (" + err.Error() + ")"
	}
	inside, err := c.CPUsAllowed(ctx)
	if err != nil || !inside.Equals(set) {
		return fmt.Sprintf("%s (inside: %s %v)", set, inside, err)
	}
	return set.String()
}

// settle waits until the asynchronous growth of the shared containers has
// landed (the plugin sends it after the runtime confirmed a shrink).
func (d *demo) settle(ctx context.Context, c *harness.Container, want string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = harness.Poll(ctx, func() (bool, error) { return d.cpus(ctx, c) == want, nil })
}

func (d *demo) checkpoint() string {
	st, err := state.Inspect(d.stateDir, d.online)
	if err != nil {
		return err.Error()
	}
	var parts []string
	st.ForEach(func(ref state.ContainerRef, a state.Assignment) {
		parts = append(parts, fmt.Sprintf("%s: original %q resized %q", ref, a.Baseline, a.Resized))
	})
	return fmt.Sprintf("shared pool %q; %s", st.DefaultCPUSet(), strings.Join(parts, "; "))
}

func (d *demo) refused(what string, err error) error {
	if err == nil {
		return fmt.Errorf("%s was expected to be refused, and was not", what)
	}
	// Show the error as CRI returns it: what the kubelet puts in the pod's
	// PodResizeInProgress condition.
	text := err.Error()
	if i := strings.Index(text, "rpc error:"); i >= 0 {
		text = text[i:]
	}
	d.say("   refused; the CRI call fails with (the kubelet shows it in the pod's resize condition):\n     %s", text)
	return nil
}

// real runs the story on the real containerd.
func (d *demo) real(ctx context.Context) error {
	maxExclusive := d.online.Size() - 1 // the shared pool keeps one CPU
	original := int64(1)
	if maxExclusive >= 3 {
		original = 2
	}
	web, err := d.env.CRI.RunPod(ctx, harness.PodSpec{Name: "web", Containers: []harness.ContainerSpec{{Name: "nginx",
		Resources: harness.Resources{CPURequestMilli: 250, CPULimitMilli: 500, MemoryRequest: 32 * harness.MiB, MemoryLimit: 64 * harness.MiB}}}})
	if err != nil {
		return err
	}
	nginx := web.Container("nginx")
	d.next("A Burstable pod \"web\" runs on the shared pool: cpuset %s", d.cpus(ctx, nginx))

	pod, err := d.env.CRI.RunPod(ctx, harness.PodSpec{Name: "dpdk", Containers: []harness.ContainerSpec{{Name: "app",
		Resources: harness.Guaranteed(original*1000, 64*harness.MiB)}}})
	if err != nil {
		return err
	}
	app := pod.Container("app")
	d.next("A Guaranteed pod \"dpdk\" asks for %d CPU(s): it is pinned to cpuset %s; \"web\" shrank to %s", original, d.cpus(ctx, app), d.cpus(ctx, nginx))
	d.say("   checkpoint: %s", d.checkpoint())

	d.next("Resize \"dpdk\" in place: memory 64Mi → 128Mi (CPUs unchanged)")
	before := d.cpus(ctx, app)
	if err := pod.Resize(ctx, map[string]harness.Resources{"app": harness.Guaranteed(original*1000, 128*harness.MiB)}); err != nil {
		return err
	}
	d.say("   accepted; cpuset before %s, after %s", before, d.cpus(ctx, app))

	grown := original + 1
	before = d.cpus(ctx, app)
	d.next("Resize \"dpdk\" in place: %d → %d CPUs", original, grown)
	err = pod.Resize(ctx, map[string]harness.Resources{"app": harness.Guaranteed(grown*1000, 128*harness.MiB)})
	if int(grown) > maxExclusive {
		d.say("   (%d CPUs would take the last CPU of the shared pool on this %d-CPU machine)", grown, d.online.Size())
		if err := d.refused("the growth", err); err != nil {
			return err
		}
		d.say("   cpuset before %s, after %s — nothing changed", before, d.cpus(ctx, app))
	} else {
		if err != nil {
			return err
		}
		d.say("   accepted; cpuset before %s, after %s (the baseline CPUs are kept); \"web\" shrank to %s", before, d.cpus(ctx, app), d.cpus(ctx, nginx))
		d.say("   checkpoint: %s", d.checkpoint())
		d.next("Resize \"dpdk\" back: %d → %d CPUs", grown, original)
		before = d.cpus(ctx, app)
		if err := pod.Resize(ctx, map[string]harness.Resources{"app": harness.Guaranteed(original*1000, 128*harness.MiB)}); err != nil {
			return err
		}
		want := d.online.Difference(mustParse(d.cpus(ctx, app))).String()
		d.settle(ctx, nginx, want)
		d.say("   accepted; cpuset before %s, after %s; \"web\" grew back to %s", before, d.cpus(ctx, app), d.cpus(ctx, nginx))
	}

	before = d.cpus(ctx, app)
	if original >= 2 {
		d.next("Resize \"dpdk\" below the CPUs it started with: %d → %d CPUs", original, original-1)
		err = pod.Resize(ctx, map[string]harness.Resources{"app": harness.Guaranteed((original-1)*1000, 128*harness.MiB)})
	} else {
		d.next("Resize \"dpdk\" below the CPU it started with, to half a CPU (it would leave its exclusive CPU for the shared pool)")
		err = pod.Resize(ctx, map[string]harness.Resources{"app": harness.Guaranteed(500, 128*harness.MiB)})
	}
	if err := d.refused("the shrink below the baseline CPUs", err); err != nil {
		return err
	}
	d.say("   cpuset before %s, after %s — nothing changed", before, d.cpus(ctx, app))

	if err := pod.Remove(ctx); err != nil {
		return err
	}
	d.settle(ctx, nginx, d.online.String())
	d.next("\"dpdk\" is deleted: its CPUs return to the shared pool, \"web\" runs on %s", d.cpus(ctx, nginx))
	d.say("   checkpoint: %s\n", d.checkpoint())
	return nil
}

// simulated replays KEP-5554's multi-container scenario through the policy
// on a fixture machine, for what a small machine cannot show for real.
func (d *demo) simulated() error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	f, err := scenario.Load(filepath.Join(root, "test", "scenarios", "kep-e2e-single-numa-node.yaml"))
	if err != nil {
		return err
	}
	d.say("== SIMULATED (same policy code, a 16-CPU fixture machine, no containers): %s", f.Name)
	if err := assemble.Simulate(f, func(line string) { d.say("   %s", line) }); err != nil {
		return errors.Join(errors.New("the simulated scenario did not go as expected"), err)
	}
	return nil
}

func mustParse(s string) cpuset.CPUSet {
	set, err := cpuset.Parse(s)
	if err != nil {
		return cpuset.New()
	}
	return set
}
