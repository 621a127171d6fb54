package integration

import (
	"flag"
	"io"
	"os"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/sirupsen/logrus"
)

// TestMain keeps the NRI runtime library's logs (logrus' standard logger)
// out of the output unless -v is given, and raises the runtime's plugin
// request timeout from containerd's 2 s to 10 s: on a starved CI machine a
// test must not see the plugin disconnected for being descheduled (a plugin
// that blocks, e.g. by calling the runtime from a handler, still fails the
// tests, after 10 s).
func TestMain(m *testing.M) {
	flag.Parse()
	adaptation.SetPluginRequestTimeout(10 * time.Second)
	if !testing.Verbose() {
		logrus.SetOutput(io.Discard)
	}
	code := m.Run()
	removePluginBinary()
	os.Exit(code)
}
