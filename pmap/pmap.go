// Package pmap is a persistent map from strings to values: a hash array
// mapped trie whose copies share everything but the paths a change
// rewrites. Copying a Map is copying two words, and a change of a copy
// never shows in another, so a decision that starts from a model and
// changes a few of its records pays for those few, not for the records it
// leaves alone (the policy's model, docs/design.md).
//
// A Map is a value: the zero Map is empty and ready to use, assignment
// copies it in constant time, and Set and Delete change only the Map they
// are called on. Iteration order is the keys' hash order: not sorted, and
// not the same from one process to the next (as a Go map's).
package pmap

import (
	"hash/maphash"
	"iter"
	"math/bits"
)

const (
	// levelBits of the hash are consumed per level of the trie.
	levelBits = 5
	// leafMax is how many entries a leaf holds before it splits (unless
	// the hash is used up, where a leaf holds every colliding key).
	leafMax = 8
	// maxDepth is the deepest level that still has hash bits to split on.
	maxDepth = 64 / levelBits
)

// Map is a persistent map from string keys to values of type V.
type Map[V any] struct {
	root *node[V]
	n    int
}

// node is an inner node (kids, one per bit set in bitmap) or a leaf
// (entries). Nodes are never changed once reachable from a Map.
type node[V any] struct {
	bitmap  uint32
	kids    []*node[V]
	entries []entry[V]
}

type entry[V any] struct {
	hash  uint64
	key   string
	value V
}

// seed is the hash's seed, chosen when the package is initialized and
// never changed: every Map of the process hashes alike, so copies share
// their nodes. (Keys are not chosen by an adversary — container and pod
// ids — but a seed per process keeps a crafted set of them from
// colliding anyway, as Go's own maps do.)
var seed = maphash.MakeSeed()

// hash hashes a key (maphash: the runtime's AES-based string hash, about
// three times faster than FNV-1a on a container id of 64 characters).
func hash(key string) uint64 { return maphash.String(seed, key) }

// Same reports whether m and o are one version of a map: copies of each
// other that neither changed since, or both empty. Maps that are not the
// same version may still hold the same entries.
func (m *Map[V]) Same(o *Map[V]) bool { return m.root == o.root }

// Len returns the number of keys.
func (m *Map[V]) Len() int { return m.n }

// Get returns the value of key, or the zero value when it has none.
func (m *Map[V]) Get(key string) V {
	v, _ := m.Lookup(key)
	return v
}

// Lookup returns the value of key and whether it has one.
func (m *Map[V]) Lookup(key string) (V, bool) {
	h := hash(key)
	n := m.root
	for depth := 0; n != nil; depth++ {
		if n.kids == nil {
			for i := range n.entries {
				if e := &n.entries[i]; e.hash == h && e.key == key {
					return e.value, true
				}
			}
			break
		}
		bit := uint32(1) << (h >> (depth * levelBits) & 31)
		if n.bitmap&bit == 0 {
			break
		}
		n = n.kids[popcount(n.bitmap&(bit-1))]
	}
	var zero V
	return zero, false
}

// Set gives key the value v.
func (m *Map[V]) Set(key string, v V) {
	root, added := insert(m.root, 0, entry[V]{hash: hash(key), key: key, value: v})
	m.root = root
	if added {
		m.n++
	}
}

// Delete removes key (nothing when it has no value).
func (m *Map[V]) Delete(key string) {
	root, removed := remove(m.root, 0, hash(key), key)
	if removed {
		m.root = root
		m.n--
	}
}

// All yields every key and its value, in the keys' hash order.
func (m *Map[V]) All() iter.Seq2[string, V] {
	root := m.root
	return func(yield func(string, V) bool) { walk(root, yield) }
}

// Keys yields every key, in the keys' hash order.
func (m *Map[V]) Keys() iter.Seq[string] {
	root := m.root
	return func(yield func(string) bool) {
		walk(root, func(k string, _ V) bool { return yield(k) })
	}
}

func walk[V any](n *node[V], yield func(string, V) bool) bool {
	if n == nil {
		return true
	}
	for i := range n.entries {
		if !yield(n.entries[i].key, n.entries[i].value) {
			return false
		}
	}
	for _, k := range n.kids {
		if !walk(k, yield) {
			return false
		}
	}
	return true
}

// insert returns n with e set (a new node: n is not changed) and whether
// the key is new.
func insert[V any](n *node[V], depth int, e entry[V]) (*node[V], bool) {
	if n == nil {
		return &node[V]{entries: []entry[V]{e}}, true
	}
	if n.kids == nil {
		for i := range n.entries {
			if n.entries[i].hash == e.hash && n.entries[i].key == e.key {
				entries := append([]entry[V](nil), n.entries...)
				entries[i] = e
				return &node[V]{entries: entries}, false
			}
		}
		if len(n.entries) < leafMax || depth >= maxDepth {
			entries := make([]entry[V], len(n.entries), len(n.entries)+1)
			copy(entries, n.entries)
			return &node[V]{entries: append(entries, e)}, true
		}
		// Split the full leaf into an inner node.
		inner := &node[V]{kids: []*node[V]{}}
		for _, old := range n.entries {
			inner = setKid(inner, depth, old)
		}
		return setKid(inner, depth, e), true
	}
	i := e.hash >> (depth * levelBits) & 31
	bit := uint32(1) << i
	pos := popcount(n.bitmap & (bit - 1))
	var kid *node[V]
	if n.bitmap&bit != 0 {
		kid = n.kids[pos]
	}
	newKid, added := insert(kid, depth+1, e)
	c := &node[V]{bitmap: n.bitmap | bit}
	if n.bitmap&bit != 0 {
		c.kids = append([]*node[V](nil), n.kids...)
		c.kids[pos] = newKid
	} else {
		c.kids = make([]*node[V], 0, len(n.kids)+1)
		c.kids = append(append(append(c.kids, n.kids[:pos]...), newKid), n.kids[pos:]...)
	}
	return c, added
}

// setKid inserts e below inner, a node being built (changed in place).
func setKid[V any](inner *node[V], depth int, e entry[V]) *node[V] {
	c, _ := insert(inner, depth, e)
	return c
}

// remove returns n without key (a new node, or nil when nothing is left)
// and whether the key was there.
func remove[V any](n *node[V], depth int, h uint64, key string) (*node[V], bool) {
	if n == nil {
		return nil, false
	}
	if n.kids == nil {
		for i := range n.entries {
			if n.entries[i].hash == h && n.entries[i].key == key {
				if len(n.entries) == 1 {
					return nil, true
				}
				entries := make([]entry[V], 0, len(n.entries)-1)
				entries = append(append(entries, n.entries[:i]...), n.entries[i+1:]...)
				return &node[V]{entries: entries}, true
			}
		}
		return n, false
	}
	bit := uint32(1) << (h >> (depth * levelBits) & 31)
	if n.bitmap&bit == 0 {
		return n, false
	}
	pos := popcount(n.bitmap & (bit - 1))
	newKid, removed := remove(n.kids[pos], depth+1, h, key)
	if !removed {
		return n, false
	}
	if newKid != nil {
		c := &node[V]{bitmap: n.bitmap, kids: append([]*node[V](nil), n.kids...)}
		c.kids[pos] = newKid
		return c, true
	}
	if len(n.kids) == 1 {
		return nil, true
	}
	kids := make([]*node[V], 0, len(n.kids)-1)
	kids = append(append(kids, n.kids[:pos]...), n.kids[pos+1:]...)
	return &node[V]{bitmap: n.bitmap &^ bit, kids: kids}, true
}

func popcount(x uint32) int { return bits.OnesCount32(x) }
