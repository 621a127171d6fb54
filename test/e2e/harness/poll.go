package harness

import (
	"context"
	"time"
)

// pollInterval is how often the harness re-checks a condition it waits for.
const pollInterval = 50 * time.Millisecond

// Poll calls cond every 50 ms until it returns true (nil), returns an error
// (that error) or ctx ends (ctx's error). Scenarios use it to wait for a
// state the plugin reaches asynchronously.
func Poll(ctx context.Context, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}
