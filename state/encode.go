package state

import (
	"bytes"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/pmap"
)

// Save writes the whole state at every commit, so the checkpoint is
// encoded here by hand rather than by encoding/json through the frozen
// format types and their maps: the same bytes (TestEncoderMatchesEncodingJSON
// and FuzzUnmarshal check it, and every Load re-encodes with encoding/json
// to verify the checksum) in a fraction of the time and allocations.

// encoder writes canonical encodings. Its buffers are reused from one
// encoding to the next (a Store keeps one for its Saves).
type encoder struct {
	buf []byte
	// mask is all zeros between two CPU lists.
	mask cpumask.Mask
	// pods, when not nil (newCachingEncoder), keeps the text of each
	// pod's entries from the last encoding, with the map it encoded: a
	// pod's map of assignments is never changed once stored in a State
	// (copy on write, state.go), so the same map is the same text.
	// Holding the map keeps its address from being reused by another. A
	// commit changes a pod or two: the others' text is copied, not
	// encoded again.
	pods map[string]podText
	// gen counts the encodings; a pod's text not used by the last one is
	// dropped.
	gen uint64
	// refs, when refsCached (a caching encoder's), is the map of container
	// ids the last encoding wrote, and refsText its text: a decision that
	// leaves the ids alone (a resize) leaves the map the same version.
	refs       pmap.Map[ContainerRef]
	refsText   []byte
	refsCached bool
}

// newCachingEncoder returns an encoder that reuses the text of the pods
// whose entries did not change since its last encoding (a Store's).
func newCachingEncoder() encoder { return encoder{pods: map[string]podText{}} }

// podText is the encoded entries of one pod (the object after its key).
type podText struct {
	entries map[string]Assignment
	text    []byte
	gen     uint64
}

// canonical returns the canonical encoding of s (diskCheckpoint), with
// "checksum":0. The bytes are the
// encoder's, until its next use.
func (e *encoder) canonical(s *State) []byte {
	e.buf = append(e.buf[:0], `{"policyName":`...)
	e.buf = appendJSONString(e.buf, PolicyName)
	e.buf = append(e.buf, `,"formatVersion":`...)
	e.buf = strconv.AppendInt(e.buf, FormatVersion, 10)
	e.buf = append(e.buf, `,"defaultCpuSet":`...)
	if s.sharedOutside.IsEmpty() {
		e.buf = append(e.buf, '"')
		e.buf = s.shared.AppendList(e.buf)
		e.buf = append(e.buf, '"')
	} else {
		e.cpuList(s.DefaultCPUSet()) // (never after validate)
	}

	pods := make([]string, 0, len(s.entries))
	for podUID, containers := range s.entries {
		if len(containers) > 0 {
			pods = append(pods, podUID)
		}
	}
	slices.Sort(pods)
	e.gen++
	for i, podUID := range pods {
		e.key(i, `,"entries":{`, podUID)
		e.podEntries(podUID, s.entries[podUID])
	}
	if len(pods) > 0 {
		e.buf = append(e.buf, '}')
	}
	if len(e.pods) > len(pods) {
		for podUID, t := range e.pods {
			if t.gen != e.gen {
				delete(e.pods, podUID)
			}
		}
	}

	e.containerRefs(&s.containers)

	for i, podUID := range sortedKeys(s.pods) {
		r := s.pods[podUID]
		e.key(i, `,"pods":{`, podUID)
		e.buf = append(e.buf, `{"resources":`...)
		e.resources(r.Resources)
		e.buf = append(e.buf, `,"overhead":`...)
		e.resources(r.Overhead)
		e.buf = append(e.buf, '}')
	}
	if len(s.pods) > 0 {
		e.buf = append(e.buf, '}')
	}

	if s.config != nil {
		e.buf = append(e.buf, `,"config":{"reservedCpuSet":`...)
		e.cpuList(s.config.ReservedCPUs)
		for i, key := range sortedKeys(s.config.Keys) {
			e.key(i, `,"keys":{`, key)
			e.buf = appendJSONString(e.buf, s.config.Keys[key])
		}
		if len(s.config.Keys) > 0 {
			e.buf = append(e.buf, '}')
		}
		e.buf = append(e.buf, '}')
	}

	for i, podUID := range sortedKeys(s.holds) {
		h := s.holds[podUID]
		e.key(i, `,"holds":{`, podUID)
		e.buf = append(e.buf, `{"cpus":`...)
		e.cpuList(h.CPUs)
		e.buf = append(e.buf, `,"since":`...)
		e.time(h.Since)
		e.buf = append(e.buf, '}')
	}
	if len(s.holds) > 0 {
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, zeroChecksumSuffix...)
	return e.buf
}

// containerRefs appends the "containers" member (container id → entry),
// from the last encoding's text when the map is the version encoded then.
func (e *encoder) containerRefs(refs *pmap.Map[ContainerRef]) {
	if e.refsCached && e.refs.Same(refs) {
		e.buf = append(e.buf, e.refsText...)
		return
	}
	start := len(e.buf)
	for i, id := range sortedIDs(refs) {
		ref := refs.Get(id)
		e.key(i, `,"containers":{`, id)
		e.buf = append(e.buf, `{"podUID":`...)
		e.buf = appendJSONString(e.buf, ref.PodUID)
		e.buf = append(e.buf, `,"name":`...)
		e.buf = appendJSONString(e.buf, ref.Name)
		e.buf = append(e.buf, '}')
	}
	if refs.Len() > 0 {
		e.buf = append(e.buf, '}')
	}
	if e.pods != nil { // a caching encoder
		e.refs, e.refsText, e.refsCached = *refs, append(e.refsText[:0], e.buf[start:]...), true
	}
}

// podEntries appends the object of a pod's entries (container name →
// entry), from the last encoding's text when the pod's map is the one
// encoded then.
func (e *encoder) podEntries(podUID string, containers map[string]Assignment) {
	if t, ok := e.pods[podUID]; ok && sameMap(t.entries, containers) {
		e.buf = append(e.buf, t.text...)
		t.gen = e.gen
		e.pods[podUID] = t
		return
	}
	start := len(e.buf)
	e.buf = append(e.buf, '{')
	for j, name := range sortedKeys(containers) {
		e.key(j, "", name)
		e.entry(containers[name])
	}
	e.buf = append(e.buf, '}')
	if e.pods != nil {
		e.pods[podUID] = podText{entries: containers, text: bytes.Clone(e.buf[start:]), gen: e.gen}
	}
}

// entry appends a as encoding/json encodes diskEntry: "init", "delayed"
// and "deviceNodes" only when set.
func (e *encoder) entry(a Assignment) {
	e.buf = append(e.buf, `{"baseline":`...)
	e.cpuList(a.Baseline)
	e.buf = append(e.buf, `,"resized":`...)
	e.cpuList(a.Resized)
	if a.Init {
		e.buf = append(e.buf, `,"init":true`...)
	}
	if !a.Delayed.IsEmpty() || !a.ReleaseAt.IsZero() {
		e.buf = append(e.buf, `,"delayed":{"cpus":`...)
		e.cpuList(a.Delayed)
		e.buf = append(e.buf, `,"releaseAt":`...)
		e.time(a.ReleaseAt)
		e.buf = append(e.buf, '}')
	}
	if a.DeviceNodes != 0 {
		// Digits, commas and dashes: nothing to escape.
		e.buf = append(e.buf, `,"deviceNodes":"`...)
		e.buf = a.DeviceNodes.appendList(e.buf)
		e.buf = append(e.buf, '"')
	}
	e.buf = append(e.buf, '}')
}

// time appends t as a quoted RFC 3339 time in UTC, with nanoseconds when
// it has any (digits, letters and punctuation: nothing to escape).
func (e *encoder) time(t time.Time) {
	e.buf = append(e.buf, '"')
	e.buf = t.UTC().AppendFormat(e.buf, time.RFC3339Nano)
	e.buf = append(e.buf, '"')
}

// sortedKeys returns the keys of m, sorted.
func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 1 {
		for k := range m {
			return []string{k}
		}
	}
	return keys(m, true)
}

// key appends the i-th key of a JSON object, opening the object with open
// (its field name) before the first one.
func (e *encoder) key(i int, open, key string) {
	if i == 0 {
		e.buf = append(e.buf, open...)
	} else {
		e.buf = append(e.buf, ',')
	}
	e.buf = appendJSONString(e.buf, key)
	e.buf = append(e.buf, ':')
}

// resources appends resources as encoding/json encodes diskResources:
// zero values left out.
func (e *encoder) resources(r ResourceRecord) {
	e.buf = append(e.buf, '{')
	sep := ""
	if r.CPUShares != 0 {
		e.buf = append(e.buf, `"cpuShares":`...)
		e.buf = strconv.AppendUint(e.buf, r.CPUShares, 10)
		sep = ","
	}
	if r.CPUQuota != 0 {
		e.buf = append(append(e.buf, sep...), `"cpuQuota":`...)
		e.buf = strconv.AppendInt(e.buf, r.CPUQuota, 10)
		sep = ","
	}
	if r.CPUPeriod != 0 {
		e.buf = append(append(e.buf, sep...), `"cpuPeriod":`...)
		e.buf = strconv.AppendUint(e.buf, r.CPUPeriod, 10)
		sep = ","
	}
	if r.MemoryLimit != 0 {
		e.buf = append(append(e.buf, sep...), `"memoryLimit":`...)
		e.buf = strconv.AppendInt(e.buf, r.MemoryLimit, 10)
	}
	e.buf = append(e.buf, '}')
}

// cpuList appends a cpuset as a quoted Linux CPU list, the text of
// cpumask.Format (digits, commas and dashes: nothing to escape).
func (e *encoder) cpuList(set cpuset.CPUSet) {
	ids := set.UnsortedList()
	for _, id := range ids {
		if id < 0 || id > cpumask.MaxID {
			e.buf = appendJSONString(e.buf, set.String()) // never after validate
			return
		}
	}
	for _, id := range ids {
		e.mask.Add(id)
	}
	e.buf = append(e.buf, '"')
	e.buf = e.mask.AppendList(e.buf)
	e.buf = append(e.buf, '"')
	for _, id := range ids {
		e.mask[id/64] = 0
	}
}

// appendJSONString appends s as encoding/json writes a string (with its
// default HTML escaping): quotes and backslashes escaped, \b \f \n \r \t,
// other control characters and <, >, & as \u00XX, invalid UTF-8 as
// \ufffd, U+2028 and U+2029 as \u2028 and \u2029.
func appendJSONString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch b {
			case '\\', '"':
				buf = append(buf, '\\', b)
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hex[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// sealCanonical replaces the "checksum":0 that ends a canonical encoding
// with the encoding's checksum, the CRC-32C of those bytes.
func sealCanonical(canonical []byte) []byte {
	sum := crc32c(canonical)
	out := canonical[:len(canonical)-len(zeroChecksumSuffix)]
	out = append(out, `,"checksum":`...)
	out = strconv.AppendUint(out, uint64(sum), 10)
	return append(out, '}')
}
