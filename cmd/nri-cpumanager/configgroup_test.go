package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/plugin"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// nodeAnswer is a kubeapi.NodeClient whose reads answer err, or a node
// with labels; it counts them.
type nodeAnswer struct {
	labels map[string]string
	err    error
	reads  atomic.Int32
	// afterRead, when set, is called with the count after each read.
	afterRead func(int32)
}

func (n *nodeAnswer) Get(context.Context, string) (*corev1.Node, error) {
	if r := n.reads.Add(1); n.afterRead != nil {
		n.afterRead(r)
	}
	if n.err != nil {
		return nil, n.err
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: n.labels}}, nil
}

func (n *nodeAnswer) Watch(context.Context, string, string) (watch.Interface, error) {
	return nil, errors.New("not watched here")
}

// TestStartGroup: the group a plugin starts with is its node's label;
// without an answer from the API server, the group it ran with last
// (recorded in its state directory), else none. A denial is not waited
// for.
func TestStartGroup(t *testing.T) {
	down := errors.New("connection refused")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n", errors.New("no get"))
	for _, tt := range []struct {
		name          string
		nodes         *nodeAnswer
		record        *string // the record in stateDir, nil for none
		group         string
		source        string
		logs          string
		atMostOneRead bool
		// recordedOnly: the wait is a minute, a recorded group's wait
		// short (a test that hangs, if the record did not shorten it).
		recordedOnly bool
	}{
		{name: "the label", nodes: &nodeAnswer{labels: map[string]string{config.GroupLabel: "canary"}}, record: ptr("big"), group: "canary", source: groupFromLabel},
		{name: "no label: no group", nodes: &nodeAnswer{labels: map[string]string{"other": "x"}}, record: ptr("big"), group: "", source: groupFromLabel},
		{name: "no answer: the record", nodes: &nodeAnswer{err: down}, record: ptr("big"), group: "big", source: groupFromRecord,
			logs: "starting with the group the plugin ran with last"},
		{name: "no answer, a record: a short wait", nodes: &nodeAnswer{err: down}, record: ptr("big"), group: "big", source: groupFromRecord, recordedOnly: true},
		{name: "no answer, a record of no group", nodes: &nodeAnswer{err: down}, record: ptr(""), group: "", source: groupFromRecord},
		{name: "no answer, no record", nodes: &nodeAnswer{err: down}, group: "", source: groupUnread, logs: "starting in no group (the plugin never ran in one here)"},
		{name: "denied: not waited for", nodes: &nodeAnswer{err: forbidden}, record: ptr("big"), group: "big", source: groupFromRecord, atMostOneRead: true},
		{name: "a record that names no group", nodes: &nodeAnswer{err: down}, record: ptr("../x"), group: "", source: groupUnread, logs: "cannot read the node's configuration group label nor the group"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stateDir := t.TempDir()
			if tt.record != nil {
				if err := writeGroupRecord(stateDir, *tt.record); err != nil {
					t.Fatal(err)
				}
			}
			log, hook := test.NewNullLogger()
			wait, recordedWait := 200*time.Millisecond, 200*time.Millisecond
			if tt.atMostOneRead {
				wait, recordedWait = time.Minute, time.Minute // a test that hangs, if the denial were waited for
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.recordedOnly {
				// Reads go on once a second while the wait lasts: a third
				// read gives up the wait the record should have shortened.
				wait = time.Minute
				tt.nodes.afterRead = func(n int32) {
					if n >= 3 {
						cancel()
					}
				}
			}
			group, source := startGroup(ctx, tt.nodes, "n", stateDir, wait, recordedWait, log)
			if group != tt.group || source != tt.source {
				t.Errorf("group %q from %s, want %q from %s", group, source, tt.group, tt.source)
			}
			var logged []string
			for _, e := range hook.AllEntries() {
				logged = append(logged, e.Message)
			}
			if tt.logs != "" && !strings.Contains(strings.Join(logged, "\n"), tt.logs) {
				t.Errorf("log %q lacks %q", logged, tt.logs)
			}
			if (tt.atMostOneRead || tt.recordedOnly) && tt.nodes.reads.Load() != 1 {
				t.Errorf("%d reads, want 1", tt.nodes.reads.Load())
			}
		})
	}
	if group, source := startGroup(context.Background(), nil, "n", t.TempDir(), time.Minute, time.Minute, logrus.New()); group != "" || source != groupUnread {
		t.Errorf("without the API: group %q from %s, want none, unread", group, source)
	}
}

func ptr[T any](v T) *T { return &v }

// TestGroupTracker: the group the plugin runs with is in
// config_group_info (one series) and recorded in the state directory; a
// label read after a start on the record makes the source the label.
func TestGroupTracker(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := plugin.NewMetrics(reg, plugin.BuildInfo{})
	if err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	log, hook := test.NewNullLogger()
	want := func(group, source string) {
		t.Helper()
		text := `# HELP nri_cpumanager_config_group_info x
# TYPE nri_cpumanager_config_group_info gauge
nri_cpumanager_config_group_info{group="` + group + `",source="` + source + `"} 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(helpOf(t, reg, "nri_cpumanager_config_group_info", text)), "nri_cpumanager_config_group_info"); err != nil {
			t.Error(err)
		}
	}
	g := newGroupTracker(log, m, stateDir, "big", groupFromRecord)
	want("big", groupFromRecord)
	if _, ok, _ := readGroupRecord(stateDir); ok {
		t.Error("a group from the record recorded again")
	}
	g.labelRead()
	want("big", groupFromLabel)
	g.applied("canary")
	want("canary", groupFromLabel)
	if group, ok, err := readGroupRecord(stateDir); group != "canary" || !ok || err != nil {
		t.Errorf("recorded %q, %v, %v; want canary", group, ok, err)
	}
	if e := hook.LastEntry(); e == nil || e.Message != "the node's configuration group changed" || e.Data["from"] != "big" || e.Data["to"] != "canary" {
		t.Errorf("last log entry %+v", e)
	}
	g.applied("")
	want("(none)", groupFromLabel)
	if group, ok, _ := readGroupRecord(stateDir); group != "" || !ok {
		t.Errorf("recorded %q, %v; want no group, recorded", group, ok)
	}
}

// helpOf puts the registered help of metric into text's # HELP line.
func helpOf(t *testing.T, reg *prometheus.Registry, metric, text string) string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == metric {
			return strings.Replace(text, "# HELP "+metric+" x", "# HELP "+metric+" "+f.GetHelp(), 1)
		}
	}
	t.Fatalf("no metric %s", metric)
	return ""
}

// TestCommandsWithAGroup: validate-config checks a node of a group (the
// group's file over the common one) and names the groups beside the
// file; a group without a file fails naming those there; state says the
// group the plugin runs with.
func TestCommandsWithAGroup(t *testing.T) {
	root, stateDir := kepNodeWithCheckpoint(t, state.New(mustParse(t, "0-11")))
	sys := "--sysfs-root=" + root
	dir := t.TempDir()
	for name, text := range map[string]string{
		"config.yaml":          "apiVersion: " + config.APIVersion + "\nkind: " + config.Kind + "\nreservedSystemCPUs: \"0\"\n",
		"group.canary.yaml":    "apiVersion: " + config.APIVersion + "\nkind: " + config.Kind + "\nobserveOnly: true\n",
		"group.big-nodes.yaml": "apiVersion: " + config.APIVersion + "\nkind: " + config.Kind + "\nreservedSystemCPUs: \"0-1\"\n",
		"group.bad.yaml":       "apiVersion: " + config.APIVersion + "\nkind: " + config.Kind + "\nprobeSocket: /elsewhere\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	common := filepath.Join(dir, "config.yaml")
	if err := writeGroupRecord(stateDir, "canary"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		args   []string
		status int
		output []string
	}{
		{"the common file names the groups", []string{"validate-config", "--config", common, sys}, 0,
			[]string{"is valid on this machine (online CPUs 0-11, reserved 0)", "Configuration groups beside it: bad, big-nodes, canary (--config-group NAME checks"}},
		{"a group", []string{"validate-config", "--config", common, "--config-group", "big-nodes", sys}, 0,
			[]string{common + " with configuration group big-nodes (" + filepath.Join(dir, "group.big-nodes.yaml") + " over it) is valid on this machine (online CPUs 0-11, reserved 0-1)",
				"reservedSystemCPUs: 0-1"}},
		{"observeOnly in a group", []string{"validate-config", "--config", common, "--config-group=canary", sys}, 0,
			[]string{"at restart: sysfsRoot, observeOnly.", "observeOnly: true"}},
		{"a group without a file", []string{"validate-config", "--config", common, "--config-group", "canry", sys}, 1,
			[]string{`configuration group "canry" has no file: ` + filepath.Join(dir, "group.canry.yaml") + " does not exist (the groups there: bad, big-nodes, canary)"}},
		{"a group setting a key of the common file", []string{"validate-config", "--config", common, "--config-group", "bad", sys}, 1,
			[]string{"probeSocket: only the common file sets it, not a group's: the probes (nri-cpumanager probe) read the common file alone"}},
		{"a group without a file to read it beside", []string{"validate-config", "--config", "-", "--config-group", "canary", sys}, 2,
			[]string{"a group's file is read beside --config FILE, not standard input"}},
		{"state names the group", []string{"state", sys, "--state-dir=" + stateDir}, 0,
			[]string{"configuration group the plugin runs with (" + filepath.Join(stateDir, "config-group") + "): canary"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			status := run(tt.args, &out, &out)
			for _, want := range tt.output {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q", want)
				}
			}
			if status != tt.status || t.Failed() {
				t.Errorf("run(%q) = %d, want %d; output:\n%s", tt.args, status, tt.status, out.String())
			}
		})
	}
}
