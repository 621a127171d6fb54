package harness

import (
	"context"
	"testing"
	"time"
)

// setupTimeout bounds NewTestEnv: a cold run builds containerd.
const setupTimeout = 10 * time.Minute

// SkipUnlessCapable skips the test when the machine cannot run the
// end-to-end suites: not root, or no cpuset, cpu and memory cgroup
// controllers (v1 or v2).
func SkipUnlessCapable(t testing.TB) {
	t.Helper()
	for _, check := range []func() error{RequireRoot, RequireCpusetCgroups} {
		if err := check(); err != nil {
			t.Skip(err)
		}
	}
}

// NewTestEnv is NewEnv for a test: it skips an incapable machine, logs
// through t, and removes everything when the test ends. When the test has
// failed, it first logs the end of containerd's and every plugin's log.
func NewTestEnv(t testing.TB, opts EnvOptions) *Env {
	t.Helper()
	SkipUnlessCapable(t)
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	env, err := NewEnv(ctx, opts)
	if err != nil {
		t.Fatalf("set up e2e environment: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("containerd log (%s), last lines:\n%s", env.Containerd.LogPath(), env.Containerd.LogTail(60))
			for _, p := range env.Plugins() {
				t.Logf("plugin log (%s), last lines:\n%s", p.LogPath(), p.LogTail(60))
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := env.Close(ctx); err != nil {
			t.Errorf("clean up e2e environment: %v", err)
		}
	})
	return env
}

// Context returns a context for a test's calls that ends at the test's
// deadline (less a minute for clean-up) or after timeout, whichever is
// first, and is cancelled when the test ends.
func Context(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	deadline := time.Now().Add(timeout)
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if td, ok := d.Deadline(); ok && td.Add(-time.Minute).Before(deadline) {
			deadline = td.Add(-time.Minute)
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	t.Cleanup(cancel)
	return ctx
}
