package plugin

import (
	"fmt"
	"testing"
	"time"
)

// TestRefusalLogIsBounded: however many distinct refusals come, the log
// remembers at most maxRefusals; expired ones go first, then the oldest,
// and a refusal still in its window is not warned about twice.
func TestRefusalLogIsBounded(t *testing.T) {
	now := time.Unix(0, 0)
	l := newRefusalLog()
	l.now = func() time.Time { return now }
	key := func(i int) refusalKey {
		return refusalKey{event: "UpdateContainer", podUID: fmt.Sprint(i), container: "app"}
	}
	for i := 0; i < maxRefusals; i++ {
		now = now.Add(time.Millisecond)
		if !l.first(key(i)) {
			t.Fatalf("refusal %d not new", i)
		}
	}
	// Full: a new one evicts the oldest (none expired).
	now = now.Add(time.Millisecond)
	if !l.first(key(maxRefusals)) || len(l.warned) != maxRefusals {
		t.Fatalf("new refusal in a full log: %d remembered", len(l.warned))
	}
	if _, ok := l.warned[key(0)]; ok {
		t.Error("the oldest refusal was kept")
	}
	if l.first(key(1)) {
		t.Error("a refusal in its window was warned about again")
	}
	// All expired: the next new one clears them.
	now = now.Add(refusalWindow)
	if !l.first(key(-1)) || len(l.warned) != 1 {
		t.Errorf("after the window: %d remembered, want only the new one", len(l.warned))
	}
	l.forget("-1", "app")
	if len(l.warned) != 0 {
		t.Errorf("forget left %d", len(l.warned))
	}
}
