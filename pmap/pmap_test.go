package pmap

import (
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"
)

// check compares m with the reference map want.
func check(t *testing.T, m *Map[int], want map[string]int) {
	t.Helper()
	if m.Len() != len(want) {
		t.Fatalf("Len() = %d, want %d", m.Len(), len(want))
	}
	got := map[string]int{}
	for k, v := range m.All() {
		if _, dup := got[k]; dup {
			t.Fatalf("All yields %q twice", k)
		}
		got[k] = v
	}
	if !maps.Equal(got, want) {
		t.Fatalf("All yields %v, want %v", got, want)
	}
	for k, v := range want {
		if g, ok := m.Lookup(k); !ok || g != v {
			t.Fatalf("Lookup(%q) = %d, %v, want %d, true", k, g, ok, v)
		}
	}
}

func TestRandomOperationsMatchAMap(t *testing.T) {
	tests := []struct {
		name string
		keys int
		ops  int
	}{
		{"few keys, one leaf", 5, 200},
		{"splits", 300, 3000},
		{"many", 5000, 20000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tt.keys)))
			var m Map[int]
			want := map[string]int{}
			var versions []Map[int]
			var wants []map[string]int
			for i := range tt.ops {
				k := "ctr-" + strconv.Itoa(rng.IntN(tt.keys))
				if rng.IntN(3) == 0 {
					m.Delete(k)
					delete(want, k)
				} else {
					m.Set(k, i)
					want[k] = i
				}
				if i%(tt.ops/10) == 0 {
					versions, wants = append(versions, m), append(wants, maps.Clone(want))
				}
			}
			check(t, &m, want)
			// Every copy taken on the way still holds what it held.
			for i := range versions {
				check(t, &versions[i], wants[i])
			}
			for k := range want {
				m.Delete(k)
			}
			check(t, &m, map[string]int{})
			if m.root != nil {
				t.Errorf("an emptied map keeps nodes")
			}
		})
	}
}

func TestCopiesAreIndependent(t *testing.T) {
	var a Map[string]
	a.Set("x", "1")
	b := a
	b.Set("x", "2")
	b.Set("y", "3")
	a.Delete("x")
	if v, ok := b.Lookup("x"); !ok || v != "2" {
		t.Errorf("b[x] = %q, %v after a's delete, want 2", v, ok)
	}
	if _, ok := a.Lookup("y"); ok || a.Len() != 0 {
		t.Errorf("a sees b's change: len %d", a.Len())
	}
	if got := a.Get("missing"); got != "" {
		t.Errorf("Get of a missing key = %q, want the zero value", got)
	}
}

func TestCollidingHashes(t *testing.T) {
	// Keys at the deepest level: entries whose hashes are all equal stay in
	// one leaf. Build such a leaf by hand through insert.
	var root *node[int]
	for i := range 20 {
		root, _ = insert(root, maxDepth, entry[int]{hash: 42, key: strconv.Itoa(i), value: i})
	}
	if len(root.entries) != 20 {
		t.Fatalf("a leaf at the deepest level holds %d of 20 colliding keys", len(root.entries))
	}
	for i := range 20 {
		var ok bool
		root, ok = remove(root, maxDepth, 42, strconv.Itoa(i))
		if !ok {
			t.Fatalf("key %d not removed", i)
		}
	}
	if root != nil {
		t.Errorf("leaf left after removing every key")
	}
}

func BenchmarkSetOnCopy(b *testing.B) {
	var m Map[int]
	for i := range 500 {
		m.Set("ctr-"+strconv.Itoa(i), i)
	}
	for b.Loop() {
		c := m
		c.Set("new", 1)
	}
}

// TestSame: a copy is the same version of its map until either changes;
// two empty maps are the same; a map changed back to its entries is not
// the same version, though it holds the same entries.
func TestSame(t *testing.T) {
	var a, empty Map[int]
	if !a.Same(&empty) {
		t.Error("two empty maps are not the same")
	}
	a.Set("x", 1)
	b := a
	if !a.Same(&b) || !b.Same(&a) {
		t.Error("a copy is not the same version")
	}
	b.Set("y", 2)
	if a.Same(&b) {
		t.Error("a copy changed since is the same version")
	}
	b.Delete("y")
	if a.Same(&b) || b.Len() != 1 || b.Get("x") != 1 {
		t.Errorf("a map changed back: same %v, %d keys", a.Same(&b), b.Len())
	}
	c := a
	c.Set("x", 1) // the same value again: a new version
	if a.Same(&c) {
		t.Error("a map whose key was set again is the same version")
	}
}
