// Package plugin is the NRI edge of nri-cpumanager: it turns containerd's
// NRI events into policy calls, commits the policy's decisions (checkpoint
// first), and hands the resulting cpusets back to containerd as container
// adjustments and ordered container updates.
//
// How containerd 2.4 applies a reply decides the shape of the code (see
// docs/design.md, "Ordering" and "NRI facts"):
//   - updates to other containers in a reply are applied, in order, before
//     the target of the event; the target's own update always last;
//   - an unsolicited UpdateContainers call is applied whenever containerd
//     gets its NRI lock, possibly after events delivered meanwhile. It is
//     therefore sent from a goroutine (never from a handler: containerd holds
//     the lock while it delivers an event) and the free CPUs it carries are
//     lent (policy.Model.Lending) until it returns, so that no decision taken
//     in between hands them out exclusively;
//   - containerd only logs a failed update of another container, so the
//     plugin keeps what it believes each container runs on, verifies it
//     against the cgroup filesystem, and re-sends what differs.
package plugin
