// Package fakesysfs writes sysfs-shaped directory trees that describe a
// machine's CPU topology and devices, so that topology discovery and
// device locality can be tested on known machines rather than on the host.
//
// A Machine lists every present CPU with its package, die, core, NUMA node
// and L3 group, plus offline and isolated CPUs, NUMA distances and the
// kernel-version quirks to imitate (missing die_id, missing cache id, no
// node directories, ...). Write turns a Machine into the files the kernel
// exposes under /sys/devices/system/{cpu,node}. Spec generates regular
// machines (sockets × NUMA nodes × cores × threads, in both Linux CPU
// numbering schemes); Layout loads hand-written layouts of real machines
// kept in layouts/; KEP5554UseCases and KEP5554Checkpoint are the machines
// of KEP-5554's examples. FS and GenerateFS build the same tree in memory
// (MemFS), which tests can edit and benchmarks use for 4096-CPU machines.
//
// WriteDevices adds the devices of a machine (Devices: PCI functions with
// their numa_node and IOMMU group, char and block devices, extra broken
// links and files) as the kernel links them under /sys/dev,
// /sys/devices and /sys/kernel/iommu_groups; TwoNodeDevices is a server
// with one device of each layout device locality reads. These trees are
// made of symbolic links, so they are written to disk only.
//
// The package does not import the code under test, so any package's tests
// can use it.
package fakesysfs
