package harness

import (
	"reflect"
	"testing"
)

func TestPlanResize(t *testing.T) {
	g := Guaranteed
	tests := []struct {
		name    string
		order   []string
		current map[string]Resources
		target  map[string]Resources
		want    []resizeStep
	}{
		{
			name:    "nothing changes",
			order:   []string{"a"},
			current: map[string]Resources{"a": g(1000, 64*MiB)},
			target:  map[string]Resources{"a": g(1000, 64*MiB)},
		},
		{
			name:    "one container grows",
			order:   []string{"a"},
			current: map[string]Resources{"a": g(1000, 64*MiB)},
			target:  map[string]Resources{"a": g(2000, 64*MiB)},
			want:    []resizeStep{{"a", g(2000, 64*MiB)}},
		},
		{
			name:    "shrink before growth whatever the pod order",
			order:   []string{"grow", "shrink"},
			current: map[string]Resources{"grow": g(1000, 64*MiB), "shrink": g(2000, 64*MiB)},
			target:  map[string]Resources{"grow": g(2000, 64*MiB), "shrink": g(1000, 64*MiB)},
			want:    []resizeStep{{"shrink", g(1000, 64*MiB)}, {"grow", g(2000, 64*MiB)}},
		},
		{
			name:    "memory first, then CPU, one call each",
			order:   []string{"a"},
			current: map[string]Resources{"a": g(1000, 64*MiB)},
			target:  map[string]Resources{"a": g(2000, 128*MiB)},
			want: []resizeStep{
				{"a", Resources{CPURequestMilli: 1000, CPULimitMilli: 1000, MemoryRequest: 128 * MiB, MemoryLimit: 128 * MiB}},
				{"a", g(2000, 128*MiB)},
			},
		},
		{
			name:    "untouched containers are left alone",
			order:   []string{"a", "b"},
			current: map[string]Resources{"a": g(1000, 64*MiB), "b": g(1000, 64*MiB)},
			target:  map[string]Resources{"b": g(3000, 64*MiB)},
			want:    []resizeStep{{"b", g(3000, 64*MiB)}},
		},
		{
			name:    "same limit, lower request is a decrease",
			order:   []string{"up", "down"},
			current: map[string]Resources{"up": {CPURequestMilli: 100, CPULimitMilli: 1000}, "down": {CPURequestMilli: 900, CPULimitMilli: 1000}},
			target:  map[string]Resources{"up": {CPURequestMilli: 900, CPULimitMilli: 1000}, "down": {CPURequestMilli: 100, CPULimitMilli: 1000}},
			want: []resizeStep{
				{"down", Resources{CPURequestMilli: 100, CPULimitMilli: 1000}},
				{"up", Resources{CPURequestMilli: 900, CPULimitMilli: 1000}},
			},
		},
		{
			name:    "removing a limit is an increase",
			order:   []string{"unlimit", "lower"},
			current: map[string]Resources{"unlimit": {CPURequestMilli: 500, CPULimitMilli: 1000}, "lower": {CPURequestMilli: 500, CPULimitMilli: 1000}},
			target:  map[string]Resources{"unlimit": {CPURequestMilli: 500}, "lower": {CPURequestMilli: 500, CPULimitMilli: 700}},
			want: []resizeStep{
				{"lower", Resources{CPURequestMilli: 500, CPULimitMilli: 700}},
				{"unlimit", Resources{CPURequestMilli: 500}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planResize(tt.order, tt.current, tt.target)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("planResize =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}
