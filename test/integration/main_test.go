package integration

import (
	"flag"
	"io"
	"os"
	"testing"

	"github.com/sirupsen/logrus"
)

// TestMain keeps the NRI runtime library's logs (logrus' standard logger)
// out of the output unless -v is given.
func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Verbose() {
		logrus.SetOutput(io.Discard)
	}
	os.Exit(m.Run())
}
