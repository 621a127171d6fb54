package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
)

// header is the type every document of these tests names.
const header = "apiVersion: " + APIVersion + "\nkind: " + Kind + "\n"

func TestParseGroupMergesLikeAKubeletDropIn(t *testing.T) {
	for _, tt := range []struct {
		name          string
		common, group string
		check         func(t *testing.T, c *Config)
	}{
		{
			name:   "a group's key replaces the common one; the others stay",
			common: "observeOnly: false\nlogLevel: debug\ntopologyManagerPolicy: single-numa-node\n",
			group:  "observeOnly: true\n",
			check: func(t *testing.T, c *Config) {
				if !c.ObserveOnly || c.LogLevel != logrus.DebugLevel || c.TopologyManagerPolicy != cpuallocator.TopologySingleNUMANode {
					t.Errorf("observeOnly %v, logLevel %v, topologyManagerPolicy %v; want true, debug (common), single-numa-node (common)",
						c.ObserveOnly, c.LogLevel, c.TopologyManagerPolicy)
				}
			},
		},
		{
			name:   "an empty group file is the common file",
			common: "alignMemory: true\n",
			group:  "",
			check: func(t *testing.T, c *Config) {
				if !c.AlignMemory {
					t.Error("alignMemory of the common file lost")
				}
			},
		},
		{
			name:   "option maps merge option by option",
			common: "cpuManagerPolicyOptions:\n  full-pcpus-only: \"true\"\n",
			group:  "cpuManagerPolicyOptions:\n  strict-cpu-reservation: \"true\"\n",
			check: func(t *testing.T, c *Config) {
				if o := c.CPUManagerPolicyOptions; !o.FullPCPUsOnly || !o.StrictCPUReservation {
					t.Errorf("options %+v, want full-pcpus-only (common) and strict-cpu-reservation (group)", o)
				}
			},
		},
		{
			name:   "null removes an option",
			common: "cpuManagerPolicyOptions:\n  full-pcpus-only: \"true\"\n  strict-cpu-reservation: \"true\"\n",
			group:  "cpuManagerPolicyOptions:\n  full-pcpus-only: null\n",
			check: func(t *testing.T, c *Config) {
				if o := c.CPUManagerPolicyOptions; o.FullPCPUsOnly || !o.StrictCPUReservation {
					t.Errorf("options %+v, want strict-cpu-reservation alone", o)
				}
			},
		},
		{
			name:   "null resets a key to its default",
			common: "topologyManagerPolicy: restricted\n",
			group:  "topologyManagerPolicy: null\n",
			check: func(t *testing.T, c *Config) {
				if c.TopologyManagerPolicy != cpuallocator.TopologyNone {
					t.Errorf("topologyManagerPolicy %v, want the default none", c.TopologyManagerPolicy)
				}
			},
		},
		{
			name:   "the topology manager's options merge too",
			common: "topologyManagerPolicyOptions:\n  prefer-closest-numa-nodes: \"true\"\n  max-allowable-numa-nodes: \"4\"\n",
			group:  "topologyManagerPolicyOptions:\n  max-allowable-numa-nodes: \"2\"\n",
			check: func(t *testing.T, c *Config) {
				if o := c.TopologyManagerPolicyOptions; !o.PreferClosestNUMANodes || o.MaxAllowableNUMANodes != 2 {
					t.Errorf("topology options %+v, want prefer-closest-numa-nodes (common) and max-allowable-numa-nodes 2 (group)", o)
				}
			},
		},
		{
			name:   "a group's count replaces the common list",
			common: "reservedSystemCPUs: \"0-1\"\n",
			group:  "reservedCPUCount: 2\n",
			check: func(t *testing.T, c *Config) {
				if !c.ReservedSystemCPUs.IsEmpty() || c.ReservedCPUCount != 2 {
					t.Errorf("reserved %q and count %d, want no list and 2", c.ReservedSystemCPUs, c.ReservedCPUCount)
				}
			},
		},
		{
			name:   "a group's list replaces the common count",
			common: "reservedSystemCPUs: \"\"\nreservedCPUCount: 2\n",
			group:  "reservedSystemCPUs: \"3\"\n",
			check: func(t *testing.T, c *Config) {
				if !c.ReservedSystemCPUs.Equals(cpuset.New(3)) || c.ReservedCPUCount != 0 {
					t.Errorf("reserved %q and count %d, want 3 and none", c.ReservedSystemCPUs, c.ReservedCPUCount)
				}
			},
		},
		{
			name:   "a group's count alone replaces the default list too",
			common: "",
			group:  "reservedCPUCount: 1\n",
			check: func(t *testing.T, c *Config) {
				if !c.ReservedSystemCPUs.IsEmpty() || c.ReservedCPUCount != 1 {
					t.Errorf("reserved %q and count %d, want no list and 1", c.ReservedSystemCPUs, c.ReservedCPUCount)
				}
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, warnings, err := ParseGroup([]byte(header+tt.common), []byte(header+tt.group))
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) > 0 {
				t.Errorf("warnings %q", warnings)
			}
			tt.check(t, c)
		})
	}
}

func TestParseGroupErrors(t *testing.T) {
	for _, tt := range []struct {
		name          string
		common, group string
		want          []string // substrings of the error, in order
	}{
		{
			name:  "a key only the common file sets",
			group: header + "stateDir: /elsewhere\nkubernetesAPI: false\nobserveOnly: true\nnodeResourceTopology: {enabled: true}\n",
			want: []string{"the group's document is invalid",
				"kubernetesAPI: only the common file sets it, not a group's: the plugin reads its node's group through the Kubernetes API",
				"nodeResourceTopology: only the common file sets it",
				"stateDir: only the common file sets it"},
		},
		{
			name:  "an unknown key",
			group: header + "observeOnyl: true\n",
			want:  []string{"the group's document is invalid", `unknown key "observeOnyl" (did you mean "observeOnly"?)`},
		},
		{
			name:  "a value of the wrong type, in the merged document",
			group: header + "observeOnly: \"yes\"\n",
			want:  []string{"the common document with the group's over it is invalid", "observeOnly: got a string, want true or false"},
		},
		{
			name:  "a value out of range",
			group: header + "topologyManagerPolicy: strict\n",
			want:  []string{"with the group's over it is invalid", `topologyManagerPolicy: "strict"`},
		},
		{
			name:  "keys valid alone but not together",
			group: header + "reservedSystemCPUs: \"1\"\nreservedCPUCount: 2\n",
			want:  []string{"with the group's over it is invalid", "reservedSystemCPUs and reservedCPUCount are both set"},
		},
		{
			name:  "a group of another format",
			group: "apiVersion: v1\nkind: " + Kind + "\n",
			want:  []string{"the group's document is invalid", "apiVersion: got \"v1\""},
		},
		{
			name:  "a group that is not a mapping",
			group: "- observeOnly\n",
			want:  []string{"the group's document is invalid", "must be a mapping"},
		},
		{
			name:   "an invalid common file is the common file's error",
			common: header + "logLevel: loud\n",
			group:  header + "logLevel: debug\n",
			want:   []string{"the common document is invalid", `logLevel: "loud"`},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			common := tt.common
			if common == "" {
				common = header
			}
			_, _, err := ParseGroup([]byte(common), []byte(tt.group))
			if err == nil {
				t.Fatal("no error")
			}
			rest := err.Error()
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error %q\nlacks %q (or not in that order)", err, w)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

func TestParseGroupWarnsOfAGroupWithoutItsType(t *testing.T) {
	_, warnings, err := ParseGroup([]byte(header), []byte("observeOnly: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "names no apiVersion and kind") {
		t.Errorf("warnings %q, want one about the group's missing apiVersion and kind", warnings)
	}
}

func TestLoadSource(t *testing.T) {
	m := newConfigMapDirFiles(t, map[string]string{
		"config.yaml":                 header + "logLevel: debug\n",
		"group.canary.yaml":           header + "observeOnly: true\n",
		"group.big-nodes.yaml":        "reservedCPUCount: 2\n",
		"group.bad name.yaml":         header, // no group: not a label value
		"group..yaml":                 header,
		"notes.txt":                   "",
		"group.canary.yaml.orig.yaml": header + "observeOnly: false\n",
	})
	if got, err := Groups(m.dir); err != nil || !slices.Equal(got, []string{"big-nodes", "canary", "canary.yaml.orig"}) {
		t.Errorf("Groups: %q, %v; want big-nodes, canary, canary.yaml.orig", got, err)
	}

	c, warnings, err := LoadSource(Source{Path: m.path(), Group: "canary"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.ObserveOnly || c.LogLevel != logrus.DebugLevel || len(warnings) != 0 {
		t.Errorf("canary: observeOnly %v, logLevel %v, warnings %q; want true, debug, none", c.ObserveOnly, c.LogLevel, warnings)
	}
	_, warnings, err = LoadSource(Source{Path: m.path(), Group: "big-nodes"})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(m.dir, "group.big-nodes.yaml") + ": the configuration names no apiVersion"; len(warnings) != 1 || !strings.HasPrefix(warnings[0], want) {
		t.Errorf("warnings %q, want one beginning %q", warnings, want)
	}
	if c, _, err := LoadSource(Source{Path: m.path()}); err != nil || c.ObserveOnly {
		t.Errorf("no group: %+v, %v; want the common file", c, err)
	}

	_, _, err = LoadSource(Source{Path: m.path(), Group: "canry"})
	var missing *GroupNotFoundError
	if !errors.As(err, &missing) || missing.Group != "canry" || missing.Path != filepath.Join(m.dir, "group.canry.yaml") {
		t.Fatalf("error %v, want a GroupNotFoundError of canry", err)
	}
	want := `configuration group "canry" has no file: ` + filepath.Join(m.dir, "group.canry.yaml") +
		" does not exist (the groups there: big-nodes, canary, canary.yaml.orig)"
	if err.Error() != want {
		t.Errorf("error %q\nwant %q", err, want)
	}
	if _, _, err := LoadSource(Source{Path: m.path(), Group: "../config"}); err == nil || !strings.Contains(err.Error(), "a label value") {
		t.Errorf("a group named ../config: %v, want a refusal of the name", err)
	}
	if err := os.WriteFile(filepath.Join(m.dir, "..data", "group.canary.yaml"), []byte(header+"pluginName: other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = LoadSource(Source{Path: m.path(), Group: "canary"})
	if want := `configuration group "canary": ` + filepath.Join(m.dir, "group.canary.yaml") + " is invalid:\npluginName: only the common file sets it"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %v\nwant one beginning %q", err, want)
	}
}

func TestCheckGroupName(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"canary", true}, {"a", true}, {"Big_Nodes-2.x", true}, {strings.Repeat("a", 63), true},
		{"", false}, {strings.Repeat("a", 64), false}, {"-canary", false}, {"canary.", false},
		{"big nodes", false}, {"../x", false}, {"a/b", false},
	} {
		if err := CheckGroupName(tt.name); (err == nil) != tt.ok {
			t.Errorf("CheckGroupName(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

func TestWatcherFollowsTheGroup(t *testing.T) {
	m := newConfigMapDirFiles(t, map[string]string{
		"config.yaml":       header + "logLevel: info\n",
		"group.canary.yaml": header + "observeOnly: true\n",
		"group.same.yaml":   header + "logLevel: info\n",
	})
	r := newRecorder()
	w, err := NewWatcher(m.path(), mustParse(t, header+"logLevel: info\n"), r.options(time.Hour, nil))
	if err != nil {
		t.Fatal(err)
	}
	w.check()
	steps := []struct {
		name    string
		group   string
		publish map[string]string
		changes int    // cumulative OnChange calls
		errs    int    // cumulative OnError calls
		running string // the group Group says, after the step
	}{
		{name: "into the canary group", group: "canary", changes: 1, running: "canary"},
		{name: "a group without a file", group: "canry", changes: 1, errs: 1, running: "canary"},
		{name: "the same missing group", group: "canry", changes: 1, errs: 1, running: "canary"},
		{name: "the group's file appears", group: "canry", publish: map[string]string{
			"config.yaml":       header + "logLevel: info\n",
			"group.canary.yaml": header + "observeOnly: true\n",
			"group.canry.yaml":  header + "alignMemory: true\n",
			"group.same.yaml":   header + "logLevel: info\n",
		}, changes: 2, errs: 1, running: "canry"},
		{name: "a group whose config is the same: the group changes", group: "same", changes: 3, errs: 1, running: "same"},
		{name: "out of any group: the group changes", group: "", changes: 4, errs: 1, running: ""},
		{name: "its file edited", group: "canary", publish: map[string]string{
			"config.yaml":       header + "logLevel: info\n",
			"group.canary.yaml": header + "observeOnly: true\nlogLevel: debug\n",
		}, changes: 5, errs: 1, running: "canary"},
		{name: "its file gone", group: "canary", publish: map[string]string{
			"config.yaml": header + "logLevel: info\n",
		}, changes: 5, errs: 2, running: "canary"},
	}
	for _, s := range steps {
		w.SetGroup(s.group)
		if s.publish != nil {
			m.publishFiles(s.publish)
		}
		w.check()
		if changes, errs := r.counts(); changes != s.changes || errs != s.errs || w.Group() != s.running {
			t.Fatalf("%s: %d changes, %d errors, group %q; want %d, %d, %q (errors: %v)", s.name, changes, errs, w.Group(), s.changes, s.errs, s.running, r.errs)
		}
	}
	if c := r.configs[0]; !c.ObserveOnly {
		t.Errorf("the canary group's config: observeOnly %v", c.ObserveOnly)
	}
	if c := r.configs[1]; !c.AlignMemory || c.ObserveOnly {
		t.Errorf("the canry group's config: alignMemory %v, observeOnly %v; want true, false", c.AlignMemory, c.ObserveOnly)
	}
	if c := r.configs[4]; !c.ObserveOnly || c.LogLevel != logrus.DebugLevel {
		t.Errorf("the edited canary group: observeOnly %v, logLevel %v", c.ObserveOnly, c.LogLevel)
	}
	var missing *GroupNotFoundError
	if !errors.As(r.errs[0], &missing) || !strings.Contains(r.errs[0].Error(), "keeping the running config") {
		t.Errorf("first error %v, want a GroupNotFoundError keeping the running config", r.errs[0])
	}
}
