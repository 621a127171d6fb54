package harness

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// criNamespace is the containerd namespace CRI works in.
const criNamespace = "k8s.io"

// shimSocketDir is where containerd's shims put their sockets, whatever
// containerd's own state directory.
const shimSocketDir = "/run/containerd/s"

// removeLeftoverContainers force-deletes the containers runc still knows in
// this containerd's runc root, kills the shims serving this containerd and
// removes their sockets. Normally there are none: the CRI clean-up removed
// the pods; this is for runs that failed half-way.
func removeLeftoverContainers(runc string, l containerdLayout) error {
	var errs []error
	root := filepath.Join(l.runcRoot(), criNamespace)
	var ids []string
	if _, err := os.Stat(root); err == nil {
		out, err := exec.Command(runc, "--root", root, "list", "-q").Output()
		if err != nil {
			errs = append(errs, fmt.Errorf("list leftover containers: %w", err))
		}
		ids = strings.Fields(string(out))
	}
	for _, id := range ids {
		if out, err := exec.Command(runc, "--root", root, "delete", "--force", id).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("delete leftover container %s: %w: %s", id, err, bytes.TrimSpace(out)))
		}
	}
	pids, err := shimPIDs(l.address())
	if err != nil {
		errs = append(errs, err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			errs = append(errs, fmt.Errorf("kill leftover shim %d: %w", pid, err))
		}
	}
	for _, id := range ids {
		// A shim serving a pod is named after the pod sandbox, which is
		// one of the runc containers.
		if err := os.Remove(shimSocketPath(l.address(), id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove leftover shim socket: %w", err))
		}
	}
	return errors.Join(errs...)
}

// shimSocketPath mirrors containerd's naming of a shim's socket: a hash of
// containerd's address, the namespace and the shim's id.
func shimSocketPath(address, id string) string {
	sum := sha256.Sum256([]byte(filepath.Join(address, criNamespace, id)))
	return filepath.Join(shimSocketDir, fmt.Sprintf("%x", sum))
}

// shimPIDs returns the processes of runc shims started by the containerd
// listening on address (their command line carries "-address <address>").
func shimPIDs(address string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // exited meanwhile
		}
		if isShimOf(strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"), address) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// isShimOf reports whether argv is a containerd runc shim's for address.
func isShimOf(argv []string, address string) bool {
	if len(argv) == 0 || filepath.Base(argv[0]) != "containerd-shim-runc-v2" {
		return false
	}
	for i := 0; i+1 < len(argv); i++ {
		if argv[i] == "-address" && argv[i+1] == address {
			return true
		}
	}
	return false
}
