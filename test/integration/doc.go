// Package integration runs the plugin against the runtime side of NRI
// (github.com/containerd/nri/pkg/adaptation, the library containerd itself
// uses) in-process over a real socket. A fake runtime plays containerd: it
// holds one lock while it delivers an event and applies the reply, applies
// the updates of other containers in the order given and the target's
// last, applies unsolicited updates under the same lock, and checks after
// every single applied update that no CPU is in two exclusive containers'
// cpusets nor in an exclusive and a shared one.
package integration
