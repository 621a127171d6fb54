package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mount is one line of /proc/self/mountinfo, reduced to what the harness
// needs.
type mount struct {
	point   string // where it is mounted
	fsType  string
	options []string // the filesystem's super options
}

// readMounts returns the calling process's mounts.
func readMounts() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	return parseMountInfo(f)
}

// parseMountInfo parses the format of /proc/<pid>/mountinfo (proc(5)).
func parseMountInfo(r io.Reader) ([]mount, error) {
	var mounts []mount
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		pre, post, ok := strings.Cut(line, " - ")
		fields, tailFields := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tailFields) < 3 {
			return nil, fmt.Errorf("parse mountinfo line %q: unexpected format", line)
		}
		mounts = append(mounts, mount{
			point:   unescapeMountPath(fields[4]),
			fsType:  tailFields[0],
			options: strings.Split(tailFields[2], ","),
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return mounts, nil
}

// unescapeMountPath undoes the octal escapes (\040 for a space, …) of a
// path in mountinfo.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountPointsUnder returns the mount points at or below dir, deepest first,
// the order in which they can be unmounted.
func mountPointsUnder(mounts []mount, dir string) []string {
	dir = filepath.Clean(dir)
	var points []string
	for _, m := range mounts {
		if m.point == dir || strings.HasPrefix(m.point, dir+"/") {
			points = append(points, m.point)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	return points
}

// unmountUnder detaches every mount at or below dir, so that removing dir
// cannot reach into a mounted filesystem.
func unmountUnder(dir string) error {
	mounts, err := readMounts()
	if err != nil {
		return err
	}
	for _, p := range mountPointsUnder(mounts, dir) {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
			return fmt.Errorf("unmount %s: %w", p, err)
		}
	}
	mounts, err = readMounts()
	if err != nil {
		return err
	}
	if left := mountPointsUnder(mounts, dir); len(left) > 0 {
		return fmt.Errorf("still mounted under %s: %s", dir, strings.Join(left, ", "))
	}
	return nil
}

// cgroupV1Mounts maps each cgroup v1 controller (and named hierarchy,
// "name=systemd") to the mount point of its hierarchy.
func cgroupV1Mounts(mounts []mount) map[string]string {
	byController := map[string]string{}
	for _, m := range mounts {
		if m.fsType != "cgroup" {
			continue
		}
		for _, opt := range m.options {
			switch opt {
			case "rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec", "clone_children", "xattr":
				continue
			}
			if strings.Contains(opt, "=") && !strings.HasPrefix(opt, "name=") {
				continue // release_agent=…, and the like
			}
			if _, seen := byController[opt]; !seen {
				byController[opt] = m.point
			}
		}
	}
	return byController
}
