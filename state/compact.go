package state

import (
	"fmt"
	"time"
)

// runCompactor is the Store's goroutine: it compacts the journal once no
// Save came for idleDelay (at the latest maxDelay after the first one), or
// at once when the journal passes compactBytes, until Close.
func (st *Store) runCompactor() {
	defer close(st.stopped)
	for {
		select {
		case <-st.stop:
			return
		case <-st.full:
		case <-st.kick:
			if !st.waitIdle() {
				return
			}
		}
		if err := st.compact(st.opts.prealloc); err != nil {
			st.logger().WithError(err).Error("could not compact the checkpoint journal; it keeps the state, retrying later")
			select {
			case <-st.stop:
				return
			case <-time.After(st.opts.idleDelay):
			}
		}
	}
}

// waitIdle waits until a whole idleDelay passed without a Save (so between
// idleDelay and twice that after the last one), maxDelay has passed, or the
// journal is full. It returns false when the Store closes. It looks for
// Saves (kick) only when the idle timer fires: a Save on the request path
// then fills kick's buffer at most once per idleDelay and never wakes this
// goroutine.
func (st *Store) waitIdle() bool {
	idle := time.NewTimer(st.opts.idleDelay)
	defer idle.Stop()
	deadline := time.NewTimer(st.opts.maxDelay)
	defer deadline.Stop()
	for {
		select {
		case <-st.stop:
			return false
		case <-st.full:
			return true
		case <-idle.C:
			select {
			case <-st.kick: // Saves came meanwhile
				idle.Reset(st.opts.idleDelay)
			default:
				return true
			}
		case <-deadline.C:
			return true
		}
	}
}

// compact writes the saved state as the snapshot and deletes the journals
// it makes obsolete. It first switches Saves to a new journal generation
// (prepared, preallocated with prealloc bytes, before the switch), taking
// the saved state at the switch; Saves wait only for the switch, never for
// the snapshot write. The snapshot names the new generation and the last
// record it holds, and the old journals are deleted only once it is on
// disk, so a crash at any point leaves a snapshot and the journals that
// continue it. compact does nothing when the snapshot is current.
func (st *Store) compact(prealloc int64) error {
	st.compactMu.Lock()
	defer st.compactMu.Unlock()

	st.mu.Lock()
	if st.journal == nil || !st.behind {
		st.mu.Unlock()
		return nil
	}
	gen := st.lastGen + 1
	st.lastGen = gen
	st.mu.Unlock()

	journal, err := createJournal(st.dir, gen, prealloc)
	if err != nil {
		return fmt.Errorf("start journal generation %d: %w", gen, err)
	}

	st.mu.Lock()
	st.setJournalLocked(journal)
	base, seq := st.base, st.seq
	// A failed write left the old journal unusable, and Saves wait for
	// this compaction to start over; once the snapshot no longer needs
	// the old journal, they can append to the new one.
	repairs := st.broken
	st.behind = false
	st.mu.Unlock()

	if err := writeSnapshot(st.dir, base, journalRefV1{Generation: gen, Sequence: seq}); err != nil {
		st.mu.Lock()
		st.behind = true
		st.mu.Unlock()
		return err
	}
	if repairs {
		st.mu.Lock()
		st.broken = false
		st.mu.Unlock()
	}
	if err := removeJournalsBefore(st.dir, gen); err != nil {
		st.mu.Lock()
		st.behind = true
		st.mu.Unlock()
		return err
	}
	return nil
}
