package plugin

import (
	"context"
	"errors"
	"fmt"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/utils/cpuset"
)

// cgroupReader reads the cpuset a container's cgroup really has.
type cgroupReader struct {
	// root is the cgroup filesystem root, e.g. /sys/fs/cgroup ("" disables).
	root string
}

func (r cgroupReader) enabled() bool { return r.root != "" }

// cpusetFile returns the file holding a container's cpuset, for cgroup v1
// (a cpuset hierarchy under root) and v2 (unified root), from the
// container's cgroups path in either driver's syntax: cgroupfs
// ("/kubepods/pod<uid>/<id>") or systemd ("<slice>:<prefix>:<name>").
func (r cgroupReader) cpusetFile(cgroupsPath string) (string, error) {
	if cgroupsPath == "" {
		return "", fmt.Errorf("no cgroups path")
	}
	rel := cgroupsPath
	if parts := strings.Split(cgroupsPath, ":"); len(parts) == 3 && !strings.Contains(cgroupsPath, "/") {
		rel = filepath.Join(expandSlice(parts[0]), parts[1]+"-"+parts[2]+".scope")
	}
	if fi, err := os.Stat(filepath.Join(r.root, "cpuset")); err == nil && fi.IsDir() {
		return filepath.Join(r.root, "cpuset", rel, "cpuset.cpus"), nil
	}
	return filepath.Join(r.root, rel, "cpuset.cpus"), nil
}

// expandSlice turns a systemd slice name into its path:
// "kubepods-burstable-pod1.slice" → "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice".
func expandSlice(slice string) string {
	name := strings.TrimSuffix(slice, ".slice")
	if name == "" || name == "-" {
		return ""
	}
	var dirs []string
	prefix := ""
	for _, comp := range strings.Split(name, "-") {
		if prefix == "" {
			prefix = comp
		} else {
			prefix += "-" + comp
		}
		dirs = append(dirs, prefix+".slice")
	}
	return filepath.Join(dirs...)
}

// cpus reads a container's cpuset from its cgroup.
func (r cgroupReader) cpus(cgroupsPath string) (cpuset.CPUSet, error) {
	file, err := r.cpusetFile(cgroupsPath)
	if err != nil {
		return cpuset.New(), err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return cpuset.New(), fmt.Errorf("reading cpuset: %w", err)
	}
	cpus, err := cpumask.Parse(strings.TrimSpace(string(data)), cpumask.MaxID)
	if err != nil {
		return cpuset.New(), fmt.Errorf("parsing %s: %w", file, err)
	}
	return cpus, nil
}

// requestVerify asks the verifier for a pass without blocking.
func (p *Plugin) requestVerify() {
	select {
	case p.verifyKick <- struct{}{}:
	default:
	}
}

// verifyLoop compares containers' real cpusets with what the plugin
// believes the runtime applied, after events and every VerifyInterval.
func (p *Plugin) verifyLoop(ctx context.Context) {
	if !p.cgroups.enabled() {
		return
	}
	var tick <-chan time.Time
	if p.opts.VerifyInterval > 0 {
		t := time.NewTicker(p.opts.VerifyInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.verifyKick:
			p.verify(false)
		case <-tick:
			p.verify(true)
		}
	}
}

// verify reads running containers' cpusets: all of them (the periodic
// pass), or after an event only those the plugin sent an update to since
// they were last read. A container whose real cpuset differs from the
// belief gets its belief corrected, which makes it pending for the sender;
// the target of an unconfirmed shrink that is seen shrunk is confirmed.
func (p *Plugin) verify(all bool) {
	type probe struct {
		id, path   string
		generation uint64
	}
	p.mu.Lock()
	var probes []probe
	for _, id := range p.model.SortedContainerIDs() {
		v := p.ctrs[id]
		if t := p.model.Containers[id]; t.Stopped || v == nil || v.cgroupPath == "" {
			continue
		}
		if _, releasing := p.model.Releasing[id]; !all && !releasing && !v.due && v.checked == v.generation {
			continue
		}
		probes = append(probes, probe{id: id, path: v.cgroupPath, generation: v.generation})
	}
	p.mu.Unlock()

	actual := make(map[string]cpuset.CPUSet, len(probes))
	for _, pr := range probes {
		cpus, err := p.cgroups.cpus(pr.path)
		if err != nil {
			// A container's cgroup exists only once it started: not worth a line.
			if entry := p.log.WithError(err).WithField("id", pr.id); errors.Is(err, os.ErrNotExist) {
				entry.Trace("cannot verify container cpuset")
			} else {
				entry.Debug("cannot verify container cpuset")
			}
			continue
		}
		actual[pr.id] = cpus
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	drifted := false
	for _, pr := range probes {
		cpus, ok := actual[pr.id]
		t, v := p.model.Containers[pr.id], p.ctrs[pr.id]
		if !ok || t == nil || t.Stopped || v == nil || v.generation != pr.generation {
			continue
		}
		v.checked, v.due = pr.generation, false
		if _, releasing := p.model.Releasing[pr.id]; releasing && cpumask.Equal(cpus, p.model.CPUsOf(pr.id)) {
			p.confirm(pr.id)
		}
		if applied := p.appliedTo(pr.id); !cpumask.Equal(applied, cpus) {
			p.log.WithFields(map[string]any{"id": pr.id, "believed": applied.String(), "actual": cpus.String()}).
				Warn("container cpuset differs from the last update; re-sending")
			p.metrics.drift()
			p.setApplied(pr.id, cpus)
			v.checked = v.generation
			p.pending[pr.id] = true
			drifted = true
		}
	}
	if drifted {
		p.kickSender()
	}
}
