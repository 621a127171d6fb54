package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"

	"k8s.io/utils/cpuset"
)

// A journal record's payload is its sequence number followed by its ops,
// each a kind byte and the kind's fields (README.md, "Journal"): strings
// as a uvarint length and the bytes, CPU sets as Linux CPU lists in
// strings, resource values as uvarints (unsigned) or zig-zag varints
// (signed).

// appendPayload appends the payload of record seq holding ops to buf.
func appendPayload(buf []byte, seq uint64, ops []op) []byte {
	buf = binary.AppendUvarint(buf, seq)
	for _, o := range ops {
		buf = append(buf, byte(o.kind))
		switch o.kind {
		case opSetDefault:
			buf = appendString(buf, cpumask.Format(o.cpus))
		case opSetAssignment:
			buf = appendString(buf, o.key)
			buf = appendString(buf, o.name)
			buf = appendString(buf, cpumask.Format(o.assignment.Original))
			buf = appendString(buf, cpumask.Format(o.assignment.Resized))
		case opDeleteAssignment:
			buf = appendString(buf, o.key)
			buf = appendString(buf, o.name)
		case opSetContainer:
			buf = appendString(buf, o.key)
			buf = appendString(buf, o.ref.PodUID)
			buf = appendString(buf, o.ref.Name)
		case opDeleteContainer, opDeletePod:
			buf = appendString(buf, o.key)
		case opSetPod:
			buf = appendString(buf, o.key)
			buf = appendResources(buf, o.pod.Resources)
			buf = appendResources(buf, o.pod.Overhead)
		}
	}
	return buf
}

func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

func appendResources(buf []byte, r Resources) []byte {
	buf = binary.AppendUvarint(buf, r.CPUShares)
	buf = binary.AppendVarint(buf, r.CPUQuota)
	buf = binary.AppendUvarint(buf, r.CPUPeriod)
	return binary.AppendVarint(buf, r.MemoryLimit)
}

// decodePayload decodes a record's payload. It never panics and its cost
// is bounded by the payload's length.
func decodePayload(payload []byte) (seq uint64, ops []op, err error) {
	r := payloadReader{data: payload}
	seq = r.uvarint()
	for r.err == nil && len(r.data) > 0 {
		o := op{kind: opKind(r.data[0])}
		r.data = r.data[1:]
		switch o.kind {
		case opSetDefault:
			o.cpus = r.cpus("defaultCpuSet")
		case opSetAssignment:
			o.key, o.name = r.string(), r.string()
			o.assignment.Original = r.cpus("original")
			o.assignment.Resized = r.cpus("resized")
		case opDeleteAssignment:
			o.key, o.name = r.string(), r.string()
		case opSetContainer:
			o.key = r.string()
			o.ref.PodUID, o.ref.Name = r.string(), r.string()
		case opDeleteContainer, opDeletePod:
			o.key = r.string()
		case opSetPod:
			o.key = r.string()
			o.pod.Resources, o.pod.Overhead = r.resources(), r.resources()
		default:
			return 0, nil, fmt.Errorf("operation %d: unknown kind %d", len(ops)+1, o.kind)
		}
		if r.err != nil {
			return 0, nil, fmt.Errorf("operation %d: %w", len(ops)+1, r.err)
		}
		ops = append(ops, o)
	}
	if r.err != nil {
		return 0, nil, fmt.Errorf("sequence number: %w", r.err)
	}
	return seq, ops, nil
}

// errPayloadTruncated says a field runs past the end of the payload.
var errPayloadTruncated = errors.New("truncated")

// payloadReader reads the fields of a payload; the first error sticks and
// every later read returns a zero value.
type payloadReader struct {
	data []byte
	err  error
}

func (r *payloadReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.data)
	if n <= 0 {
		r.err = errPayloadTruncated
		return 0
	}
	r.data = r.data[n:]
	return v
}

func (r *payloadReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.data)
	if n <= 0 {
		r.err = errPayloadTruncated
		return 0
	}
	r.data = r.data[n:]
	return v
}

func (r *payloadReader) string() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.data)) {
		r.err = errPayloadTruncated
		return ""
	}
	s := string(r.data[:n])
	r.data = r.data[n:]
	return s
}

func (r *payloadReader) cpus(what string) cpuset.CPUSet {
	text := r.string()
	if r.err != nil {
		return cpuset.CPUSet{}
	}
	set, err := cpumask.Parse(text, cpumask.MaxID)
	if err != nil {
		r.err = fmt.Errorf("%s %q does not parse: %w", what, text, err)
	}
	return set
}

func (r *payloadReader) resources() Resources {
	return Resources{CPUShares: r.uvarint(), CPUQuota: r.varint(), CPUPeriod: r.uvarint(), MemoryLimit: r.varint()}
}
