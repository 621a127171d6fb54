//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strings"
)

// readFile returns a file's content without surrounding white space.
func readFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return strings.TrimSpace(string(data)), nil
}
