package harness

import (
	"reflect"
	"strings"
	"testing"
)

const sampleMountInfo = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
25 22 0:21 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:22 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
27 25 0:23 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,cpu,cpuacct
31 25 0:27 / /sys/fs/cgroup/cpuset rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpuset,clone_children
32 25 0:28 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,memory
33 25 0:29 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids,release_agent=/bin/true
40 22 0:40 / /tmp/ctd-1/state/sandboxes/abc/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k
41 22 8:1 /snapshots/1 /tmp/ctd-1/state/task/abc/rootfs rw,relatime - ext4 /dev/vda1 rw
42 22 0:41 / /tmp/ctd-10/state/x rw - tmpfs tmpfs rw
43 22 0:42 / /tmp/with\040space rw - tmpfs tmpfs rw
`

func TestParseMountInfo(t *testing.T) {
	mounts, err := parseMountInfo(strings.NewReader(sampleMountInfo))
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) != 12 {
		t.Fatalf("parsed %d mounts, want 12", len(mounts))
	}
	last := mounts[len(mounts)-1]
	if last.point != "/tmp/with space" || last.fsType != "tmpfs" {
		t.Errorf("last mount = %+v, want /tmp/with space of type tmpfs", last)
	}
	if _, err := parseMountInfo(strings.NewReader("garbage line\n")); err == nil {
		t.Error("a malformed line parsed without error")
	}
}

func TestCgroupV1Mounts(t *testing.T) {
	mounts, err := parseMountInfo(strings.NewReader(sampleMountInfo))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"name=systemd": "/sys/fs/cgroup/systemd",
		"cpu":          "/sys/fs/cgroup/cpu,cpuacct",
		"cpuacct":      "/sys/fs/cgroup/cpu,cpuacct",
		"cpuset":       "/sys/fs/cgroup/cpuset",
		"memory":       "/sys/fs/cgroup/memory",
		"pids":         "/sys/fs/cgroup/pids",
	}
	if got := cgroupV1Mounts(mounts); !reflect.DeepEqual(got, want) {
		t.Errorf("cgroupV1Mounts =\n%v\nwant\n%v", got, want)
	}
}

func TestMountPointsUnder(t *testing.T) {
	mounts, err := parseMountInfo(strings.NewReader(sampleMountInfo))
	if err != nil {
		t.Fatal(err)
	}
	got := mountPointsUnder(mounts, "/tmp/ctd-1/")
	want := []string{"/tmp/ctd-1/state/sandboxes/abc/shm", "/tmp/ctd-1/state/task/abc/rootfs"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mountPointsUnder(/tmp/ctd-1) = %q, want %q (deepest first, not /tmp/ctd-10)", got, want)
	}
	if got := mountPointsUnder(mounts, "/nowhere"); len(got) != 0 {
		t.Errorf("mountPointsUnder(/nowhere) = %q", got)
	}
}
