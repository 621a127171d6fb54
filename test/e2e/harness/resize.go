package harness

import (
	"context"
	"fmt"
)

// resourceKind is one of the resources the kubelet resizes separately.
type resourceKind int

const (
	memoryResource resourceKind = iota
	cpuResource
)

// resizeStep is one UpdateContainerResources call of a resize.
type resizeStep struct {
	container string
	resources Resources
}

// Resize changes the resources of the named containers in place the way
// the kubelet does (KEP-1287): memory first, then CPU; for each, the
// containers whose amount decreases before those whose amount increases,
// one UpdateContainerResources per container and resource; then
// UpdatePodSandboxResources with the new pod totals. It stops at the first
// refusal, leaving the containers already updated as they are.
func (p *Pod) Resize(ctx context.Context, target map[string]Resources) error {
	current := map[string]Resources{}
	var order []string
	for _, c := range p.Containers {
		current[c.Name] = c.Resources
		order = append(order, c.Name)
	}
	for name := range target {
		if _, ok := current[name]; !ok {
			return fmt.Errorf("resize pod %s: no container %q", p.Spec.Name, name)
		}
	}
	for _, step := range planResize(order, current, target) {
		if err := p.Container(step.container).Update(ctx, step.resources); err != nil {
			return fmt.Errorf("resize pod %s: %w", p.Spec.Name, err)
		}
	}
	return p.UpdateResources(ctx, p.Resources())
}

// planResize returns the UpdateContainerResources calls that take the
// containers (listed in pod order) from current to target resources.
func planResize(order []string, current, target map[string]Resources) []resizeStep {
	state := map[string]Resources{}
	for name, r := range current {
		state[name] = r.defaulted()
	}
	var steps []resizeStep
	for _, kind := range []resourceKind{memoryResource, cpuResource} {
		var down, up []string
		for _, name := range order {
			want, ok := target[name]
			if !ok {
				continue
			}
			have := state[name]
			next := withResource(have, want.defaulted(), kind)
			switch {
			case next == have:
			case isDecrease(have, next, kind):
				down = append(down, name)
			default:
				up = append(up, name)
			}
		}
		for _, name := range append(down, up...) {
			state[name] = withResource(state[name], target[name].defaulted(), kind)
			steps = append(steps, resizeStep{container: name, resources: state[name]})
		}
	}
	return steps
}

// withResource returns have with the request and limit of kind taken from
// want.
func withResource(have, want Resources, kind resourceKind) Resources {
	if kind == memoryResource {
		have.MemoryRequest, have.MemoryLimit = want.MemoryRequest, want.MemoryLimit
	} else {
		have.CPURequestMilli, have.CPULimitMilli = want.CPURequestMilli, want.CPULimitMilli
	}
	return have
}

// isDecrease reports whether going from have to next lowers the limit of
// kind, or keeps the limit and lowers the request.
func isDecrease(have, next Resources, kind resourceKind) bool {
	hr, hl, nr, nl := have.CPURequestMilli, have.CPULimitMilli, next.CPURequestMilli, next.CPULimitMilli
	if kind == memoryResource {
		hr, hl, nr, nl = have.MemoryRequest, have.MemoryLimit, next.MemoryRequest, next.MemoryLimit
	}
	if nl != hl {
		// No limit (0) is the largest limit of all.
		return hl == 0 || (nl != 0 && nl < hl)
	}
	return nr < hr
}
