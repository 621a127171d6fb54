// Package fakesysfs writes sysfs-shaped directory trees that describe a
// machine's CPU topology, so that topology discovery can be tested on known
// machines rather than on the host.
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
// The package does not import the code under test, so any package's tests
// can use it.
package fakesysfs
