// Package integration runs the plugin against the runtime side of NRI
// (github.com/containerd/nri/pkg/adaptation, the library containerd itself
// uses) in-process over a real socket. The fake runtime of
// test/fakeruntime plays containerd 2.4 and checks after every single
// applied update that no CPU is in two exclusive containers' cpusets nor
// in an exclusive and a shared one.
package integration
