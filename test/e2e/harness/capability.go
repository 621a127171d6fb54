package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// RequireRoot returns nil when the process runs as root, which containerd
// and runc need, else an error saying so (a reason to skip).
func RequireRoot() error {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("needs root to run containerd and runc (running as uid %d)", uid)
	}
	return nil
}

// cpusetControllers are the controllers the plugin's pinning and the
// cgroup readers rely on.
var cpusetControllers = []string{"cpuset", "cpu", "memory"}

// RequireCpusetCgroups returns nil when the machine's cgroups offer the
// cpuset, cpu and memory controllers, either as cgroup v1 hierarchies
// (a v1 or hybrid machine) or in the cgroup v2 unified hierarchy; else an
// error saying what is missing (a reason to skip).
func RequireCpusetCgroups() error {
	layout, err := machineCgroups()
	if err != nil {
		return err
	}
	if layout.version() == 2 {
		data, err := os.ReadFile(filepath.Join(layout.unified, "cgroup.controllers"))
		if err != nil {
			return fmt.Errorf("cgroup v2 hierarchy at %s: %w", layout.unified, err)
		}
		var missing []string
		for _, c := range cpusetControllers {
			if !containsWord(string(data), c) {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("the cgroup v2 hierarchy at %s does not offer the %s controller(s) (cgroup.controllers: %q)",
				layout.unified, strings.Join(missing, ", "), strings.TrimSpace(string(data)))
		}
		return nil
	}
	var errs []error
	for _, c := range cpusetControllers {
		root, ok := layout.v1[c]
		if !ok {
			errs = append(errs, fmt.Errorf("no cgroup v1 hierarchy with the %s controller is mounted, nor a cgroup v2 hierarchy offering cpuset", c))
			continue
		}
		if c == "cpuset" {
			if _, err := os.Stat(filepath.Join(root, "cpuset.cpus")); err != nil {
				errs = append(errs, fmt.Errorf("cgroup v1 cpuset hierarchy at %s is not usable: %w", root, err))
			}
		}
	}
	return errors.Join(errs...)
}
