package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/kubeapi"
	"github.com/nri-cpumanager/nri-cpumanager/plugin"
)

// Where the node's configuration group came from: the source label of
// nri_cpumanager_config_group_info.
const (
	// groupFromFlag: --config-group; the node's label is not read.
	groupFromFlag = "flag"
	// groupFromLabel: the node's label config.GroupLabel, read through
	// the Kubernetes API (absent: no group).
	groupFromLabel = "label"
	// groupFromRecord: the group the plugin ran with last (groupRecord),
	// the API server not answering at the start; the label applies once
	// it does.
	groupFromRecord = "recorded"
	// groupUnread: no flag, and no API to read the label with: no group.
	groupUnread = "unread"
)

// groupRecord is the file in stateDir holding the configuration group the
// plugin runs with (empty for none): it starts with it again when the API
// server does not answer at its next start, rather than with another
// group's configuration.
const groupRecord = "config-group"

// labelWait bounds the start's read of the node's label: the plugin is
// not registered with NRI meanwhile (and containerd, failing closed,
// refuses new containers). recordedLabelWait bounds it where the group
// the plugin ran with is recorded: a restart during an outage of the API
// server then starts at once with it, and follows the label once the
// server answers.
const (
	labelWait         = 10 * time.Second
	recordedLabelWait = 2 * time.Second
)

// readGroupRecord returns the group recorded in stateDir, and whether one
// is.
func readGroupRecord(stateDir string) (string, bool, error) {
	data, err := os.ReadFile(filepath.Join(stateDir, groupRecord))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading the recorded configuration group: %w", err)
	}
	group := strings.TrimSpace(string(data))
	if group != "" {
		if err := config.CheckGroupName(group); err != nil {
			return "", false, fmt.Errorf("%s: %w", filepath.Join(stateDir, groupRecord), err)
		}
	}
	return group, true, nil
}

// writeGroupRecord records group in stateDir, whole or not at all.
func writeGroupRecord(stateDir, group string) error {
	path := filepath.Join(stateDir, groupRecord)
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(group+"\n"), 0o644); err != nil {
		return fmt.Errorf("recording the configuration group: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("recording the configuration group: %w", err)
	}
	return nil
}

// startGroup returns the configuration group the plugin starts with, and
// where it came from: the node's label read through nodes (nil without
// the API), waiting at most wait for the API server (recordedWait where a
// group is recorded in stateDir); when it does not answer, the group
// recorded.
func startGroup(ctx context.Context, nodes kubeapi.NodeClient, node, stateDir string, wait, recordedWait time.Duration, log *logrus.Logger) (string, string) {
	if nodes == nil {
		return "", groupUnread
	}
	recorded, ok, recErr := readGroupRecord(stateDir)
	if ok && recErr == nil {
		wait = min(wait, recordedWait)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	group, err := readLabel(ctx, nodes, node)
	if err == nil {
		return group, groupFromLabel
	}
	group = recorded
	entry := log.WithError(err).WithFields(logrus.Fields{"node": node, "label": config.GroupLabel})
	switch {
	case recErr != nil:
		entry.WithField("record", recErr).Error("cannot read the node's configuration group label nor the group the plugin ran with: starting in no group; the label applies once the API server answers")
		return "", groupUnread
	case !ok:
		entry.Warn("cannot read the node's configuration group label: starting in no group (the plugin never ran in one here); the label applies once the API server answers")
		return "", groupUnread
	}
	entry.WithField("group", group).Warn("cannot read the node's configuration group label: starting with the group the plugin ran with last; the label applies once the API server answers")
	return group, groupFromRecord
}

// groupError says why the plugin cannot start in group, which source
// gave: it does not start, rather than run another group's configuration
// (a canary that should only observe would pin).
func groupError(group, source, stateDir string, err error) error {
	if source == groupFromRecord {
		return fmt.Errorf("the configuration group the plugin ran with last (%q, recorded in %s; the API server did not answer) cannot be read: %w",
			group, filepath.Join(stateDir, groupRecord), err)
	}
	return fmt.Errorf("the node's label %s=%s names a configuration group the plugin cannot run (fix the label, or the group's file in the ConfigMap): %w",
		config.GroupLabel, group, err)
}

// readLabel reads the node's group label, again every second while the
// API server does not answer, until ctx ends. A denial or a node the API
// server does not know is not retried.
func readLabel(ctx context.Context, nodes kubeapi.NodeClient, node string) (string, error) {
	for {
		group, err := kubeapi.NodeLabel(ctx, nodes, node, config.GroupLabel)
		if err == nil || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err) {
			return group, err
		}
		select {
		case <-ctx.Done():
			return "", err
		case <-time.After(time.Second):
		}
	}
}

// groupTracker follows the configuration group the plugin runs with, and
// says it: in the log, nri_cpumanager_config_group_info and the record
// in stateDir.
type groupTracker struct {
	log      *logrus.Logger
	metrics  *plugin.Metrics
	stateDir string

	mu     sync.Mutex
	group  string // the group of the configuration the plugin runs
	source string
}

// newGroupTracker starts tracking the group a plugin started with.
func newGroupTracker(log *logrus.Logger, m *plugin.Metrics, stateDir, group, source string) *groupTracker {
	g := &groupTracker{log: log, metrics: m, stateDir: stateDir, group: group, source: source}
	m.ConfigGroup(orNone(group), source)
	if source == groupFromLabel || source == groupFromFlag {
		g.record()
	}
	return g
}

// labelRead notes that the node's label was read: the group follows it
// from now on.
func (g *groupTracker) labelRead() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.source != groupFromLabel {
		g.source = groupFromLabel
		g.metrics.ConfigGroup(orNone(g.group), g.source)
	}
}

// applied notes that the plugin runs a configuration read with group.
func (g *groupTracker) applied(group string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if group == g.group {
		return
	}
	g.log.WithFields(logrus.Fields{"from": orNone(g.group), "to": orNone(group)}).Info("the node's configuration group changed")
	g.group = group
	g.metrics.ConfigGroup(orNone(g.group), g.source)
	g.record()
}

// record writes the group to stateDir; a failure is only logged (the
// record serves a start without the API server).
func (g *groupTracker) record() {
	if err := writeGroupRecord(g.stateDir, g.group); err != nil {
		g.log.WithError(err).Warn("cannot record the configuration group in the state directory")
	}
}

// orNone names a group for the log: "(none)" for no group.
func orNone(group string) string {
	if group == "" {
		return "(none)"
	}
	return group
}
