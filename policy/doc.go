// Package policy is the static CPU policy with KEP-5554 resize semantics, as
// pure decision logic: no NRI types and no I/O.
//
// Every entry point takes a Model (the persisted assignments plus the
// containers the runtime runs) and a request, and returns a Decision: the
// new Model, the cpuset of the target container, and the ordered cpuset
// updates of other containers. Nothing is changed in place; the caller
// commits Decision.Model once the checkpoint is on disk, and hands the
// updates to the runtime.
//
// Ordering (docs/design.md, "Ordering"): a decision never asks the runtime to give
// a CPU to one container before it has been taken from every other
// container that may not share it. Growth of an exclusive container comes
// with the shrink of the shared containers in Decision.Others (which the
// runtime applies before the target); the CPUs the shrink of an exclusive
// container releases belong to nobody until the runtime confirmed the shrink
// (Confirm), whose Decision.Others grows the shared containers into them.
package policy
