package harness

import (
	"path/filepath"
	"testing"
	"time"
)

func TestFileLockExcludesASecondHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "install.lock")
	first, err := lockFile(path)
	if err != nil {
		t.Fatal(err)
	}
	acquired := make(chan *fileLock)
	go func() {
		// A separate open file description, as another process would have.
		second, err := lockFile(path)
		if err != nil {
			t.Error(err)
			close(acquired)
			return
		}
		acquired <- second
	}()
	select {
	case <-acquired:
		t.Fatal("a second holder got the lock while the first held it")
	case <-time.After(200 * time.Millisecond):
	}
	if err := first.Unlock(); err != nil {
		t.Fatal(err)
	}
	select {
	case second := <-acquired:
		if second == nil {
			return
		}
		if err := second.Unlock(); err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second holder never got the lock after it was released")
	}
}
