package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Configuration groups: nodes of one shape, or a canary, run the common
// file with the keys of their group's file over it. The group's file is
// group.<name>.yaml beside the common file (another key of the same
// ConfigMap); the node label GroupLabel names a node's group. A group's
// file is read as a drop-in of the kubelet's --config-dir is read over
// its --config: as a JSON merge patch (RFC 7386) of the common file, so
// it names only the keys it changes, a nested mapping (the option maps,
// nodeResourceTopology) is merged key by key, and null resets a key to
// its default. Keys whose declaration says commonOnly are the common
// file's alone.

// GroupLabel is the node label whose value names the node's
// configuration group (nri-plugins labels nodes config.nri/group).
const GroupLabel = "nri-cpumanager.io/config-group"

// GroupNamePattern is what a group name may be: a label value that is not
// empty, so that every value of GroupLabel names a group whose file is a
// valid key of a ConfigMap.
const GroupNamePattern = `^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`

var groupName = regexp.MustCompile(GroupNamePattern)

// The group files' names: GroupFilePrefix + name + GroupFileSuffix.
const (
	GroupFilePrefix = "group."
	GroupFileSuffix = ".yaml"
)

// CheckGroupName reports why name cannot name a group, or nil.
func CheckGroupName(name string) error {
	if !groupName.MatchString(name) {
		return fmt.Errorf("configuration group %q: a name is 1 to 63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit (a label value)", name)
	}
	return nil
}

// GroupFile returns the file name of group name: group.<name>.yaml.
func GroupFile(name string) string { return GroupFilePrefix + name + GroupFileSuffix }

// Source says where a configuration is read from: the common file, and
// the file of the node's group beside it.
type Source struct {
	// Path is the common file.
	Path string
	// Group is the node's group; "" reads the common file alone.
	Group string
}

// GroupPath is the path of the group's file: GroupFile(Group) in Path's
// directory; "" without a group.
func (s Source) GroupPath() string {
	if s.Group == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(s.Path), GroupFile(s.Group))
}

// GroupNotFoundError is the error of a group without a file.
type GroupNotFoundError struct {
	// Group is the group's name, Path the file that does not exist.
	Group, Path string
	// Known are the groups whose files are there.
	Known []string
}

func (e *GroupNotFoundError) Error() string {
	known := "no group file is there"
	if len(e.Known) > 0 {
		known = "the groups there: " + strings.Join(e.Known, ", ")
	}
	return fmt.Sprintf("configuration group %q has no file: %s does not exist (%s)", e.Group, e.Path, known)
}

// Groups returns the names of the groups whose files are in dir, sorted.
func Groups(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing the configuration groups: %w", err)
	}
	var names []string
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), GroupFilePrefix)
		if !ok {
			continue
		}
		if name, ok = strings.CutSuffix(name, GroupFileSuffix); ok && CheckGroupName(name) == nil {
			names = append(names, name)
		}
	}
	return names, nil
}

// LoadSource reads the configuration of s: its common file, with its
// group's file over it. The warnings are what the files should change
// although they are valid, each naming its file.
func LoadSource(s Source) (*Config, []string, error) {
	if s.Group == "" {
		c, warnings, err := LoadWithWarnings(s.Path)
		for i, w := range warnings {
			warnings[i] = s.Path + ": " + w
		}
		return c, warnings, err
	}
	common, err := os.ReadFile(s.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading config: %w", err)
	}
	group, err := readGroup(s)
	if err != nil {
		return nil, nil, err
	}
	return parseSource(s, common, group)
}

// readGroup reads the file of s's group.
func readGroup(s Source) ([]byte, error) {
	if err := CheckGroupName(s.Group); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(s.GroupPath())
	if errors.Is(err, fs.ErrNotExist) {
		known, _ := Groups(filepath.Dir(s.Path))
		return nil, &GroupNotFoundError{Group: s.Group, Path: s.GroupPath(), Known: known}
	}
	if err != nil {
		return nil, fmt.Errorf("reading configuration group %q: %w", s.Group, err)
	}
	return data, nil
}

// parseSource parses the contents of s's files, naming them in errors
// and warnings.
func parseSource(s Source, common, group []byte) (*Config, []string, error) {
	c, warnings, err := parseGroup(common, group)
	if err != nil {
		var ge *groupError
		if errors.As(err, &ge) {
			return nil, nil, fmt.Errorf("configuration group %q: %s is invalid:\n%w", s.Group, s.GroupPath(), ge.err)
		}
		var ce *commonError
		if errors.As(err, &ce) {
			return nil, nil, fmt.Errorf("config file %s is invalid:\n%w", s.Path, ce.err)
		}
		return nil, nil, fmt.Errorf("config file %s with configuration group %q (%s) is invalid:\n%w", s.Path, s.Group, s.GroupPath(), err)
	}
	for i, w := range warnings.common {
		warnings.common[i] = s.Path + ": " + w
	}
	for i, w := range warnings.group {
		warnings.group[i] = s.GroupPath() + ": " + w
	}
	return c, slices.Concat(warnings.common, warnings.group), nil
}

// groupWarnings are parseGroup's warnings, by file.
type groupWarnings struct{ common, group []string }

// commonError and groupError say which file an error of parseGroup is
// in; the other errors are of the two together.
type (
	commonError struct{ err error }
	groupError  struct{ err error }
)

func (e *commonError) Error() string { return e.err.Error() }
func (e *commonError) Unwrap() error { return e.err }
func (e *groupError) Error() string  { return e.err.Error() }
func (e *groupError) Unwrap() error  { return e.err }

// ParseGroup parses a common document with a group's document over it
// (see the top of this file): the configuration of a node in the group.
// The common document must be valid on its own; the group's may write
// only keys a group may set. The warnings are those of either document.
func ParseGroup(common, group []byte) (*Config, []string, error) {
	c, warnings, err := parseGroup(common, group)
	var ge *groupError
	var ce *commonError
	switch {
	case errors.As(err, &ge):
		return nil, nil, fmt.Errorf("the group's document is invalid:\n%w", ge.err)
	case errors.As(err, &ce):
		return nil, nil, fmt.Errorf("the common document is invalid:\n%w", ce.err)
	case err != nil:
		return nil, nil, fmt.Errorf("the common document with the group's over it is invalid:\n%w", err)
	}
	return c, slices.Concat(warnings.common, warnings.group), nil
}

// parseGroup is ParseGroup, its warnings and errors by file.
func parseGroup(common, group []byte) (*Config, groupWarnings, error) {
	var warnings groupWarnings
	var err error
	if _, warnings.common, err = ParseWithWarnings(common); err != nil {
		return nil, groupWarnings{}, &commonError{err}
	}
	top, _, err := topOf(common)
	if err != nil {
		return nil, groupWarnings{}, &commonError{err} // ParseWithWarnings read it
	}
	over, groupWarn, err := topOf(group)
	if err == nil {
		err = checkGroupKeys(slices.Sorted(maps.Keys(over)))
	}
	if err != nil {
		return nil, groupWarnings{}, &groupError{err}
	}
	warnings.group = groupWarn
	merged, err := mergeGroup(top, over)
	if err != nil {
		return nil, groupWarnings{}, &groupError{err}
	}
	d, err := decodeTop(merged)
	if err != nil {
		return nil, groupWarnings{}, err
	}
	c, err := d.build()
	if err != nil {
		return nil, groupWarnings{}, err
	}
	return c, warnings, nil
}

// checkGroupKeys reports every key a group may not write: unknown keys
// and the common file's own.
func checkGroupKeys(names []string) error {
	errs := []error{checkKeys(names)}
	for _, name := range names {
		if k, ok := keyNamed(name); ok && k.commonOnly != "" {
			errs = append(errs, fmt.Errorf("%s: only the common file sets it, not a group's: %s", name, k.commonOnly))
		}
	}
	return errors.Join(errs...)
}

// mergeGroup returns common's keys with the group's over them, as a JSON
// merge patch applies. The reservation is one setting written two ways:
// a group that writes either of reservedSystemCPUs and reservedCPUCount
// replaces the common file's reservation, the other key taking its
// default, as the --reserved-cpus flag replaces a count.
func mergeGroup(common, group map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	merged := maps.Clone(common)
	_, list := group["reservedSystemCPUs"]
	_, count := group["reservedCPUCount"]
	if list != count {
		delete(merged, "reservedSystemCPUs")
		delete(merged, "reservedCPUCount")
	}
	for _, name := range slices.Sorted(maps.Keys(group)) {
		v, err := mergePatch(merged[name], group[name])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if v == nil {
			delete(merged, name)
			continue
		}
		merged[name] = v
	}
	return merged, nil
}

// mergePatch applies the JSON merge patch patch to target (RFC 7386):
// nil for null, which removes the key.
func mergePatch(target, patch json.RawMessage) (json.RawMessage, error) {
	if bytes.Equal(bytes.TrimSpace(patch), []byte("null")) {
		return nil, nil
	}
	var over map[string]json.RawMessage
	if json.Unmarshal(patch, &over) != nil || over == nil {
		return patch, nil // not a mapping: it replaces
	}
	var base map[string]json.RawMessage
	if json.Unmarshal(target, &base) != nil || base == nil {
		base = map[string]json.RawMessage{}
	}
	for _, name := range slices.Sorted(maps.Keys(over)) {
		v, err := mergePatch(base[name], over[name])
		if err != nil {
			return nil, err
		}
		if v == nil {
			delete(base, name)
			continue
		}
		base[name] = v
	}
	out, err := json.Marshal(base)
	if err != nil {
		return nil, fmt.Errorf("merging: %w", err)
	}
	return out, nil
}
