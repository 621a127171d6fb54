package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// RequireRoot returns nil when the process runs as root, which containerd
// and runc need, else an error saying so (a reason to skip).
func RequireRoot() error {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("needs root to run containerd and runc (running as uid %d)", uid)
	}
	return nil
}

// RequireCgroupV1Cpuset returns nil when cgroup v1 hierarchies with the
// cpuset, cpu and memory controllers are mounted, which the cgroup readers
// and the plugin's pinning rely on; else an error saying what is missing.
func RequireCgroupV1Cpuset() error {
	mounts, err := readMounts()
	if err != nil {
		return err
	}
	byController := cgroupV1Mounts(mounts)
	var errs []error
	for _, c := range []string{"cpuset", "cpu", "memory"} {
		root, ok := byController[c]
		if !ok {
			errs = append(errs, fmt.Errorf("no cgroup v1 hierarchy with the %s controller is mounted (cgroup v2 only machines are not supported)", c))
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
