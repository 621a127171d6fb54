package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// The images the harness builds from the host's static busybox.
const (
	// PauseImage is the sandbox ("pause") image: it sleeps forever.
	PauseImage = "localhost/pause:e2e"
	// BusyboxImage is the workload image: Cmd /bin/sleep 3600, with every
	// busybox applet linked in /bin (sh, sleep, cat, grep, nproc, taskset, …).
	BusyboxImage = "localhost/busybox:e2e"
)

// imageCommands are the Cmd of each image.
var imageCommands = map[string][]string{
	PauseImage:   {"/bin/sleep", "2147483647"},
	BusyboxImage: {"/bin/sleep", "3600"},
}

// imageLayoutVersion names the cached archives; bump it whenever the images
// change, so that no stale archive is reused.
const imageLayoutVersion = "v2"

// requiredApplets must be in the busybox the images are built from.
var requiredApplets = []string{"sh", "sleep", "cat", "grep"}

// BuildImages writes an OCI image-layout archive holding PauseImage and
// BusyboxImage, built from the static busybox binary, into cacheDir and
// returns its path. The archive is named after the busybox content, so it is
// built once per busybox and reused; the write is atomic.
func BuildImages(ctx context.Context, busybox, cacheDir string, logf Logf) (string, error) {
	logf = logf.orDiscard()
	bin, err := os.ReadFile(busybox)
	if err != nil {
		return "", fmt.Errorf("build images: %w", err)
	}
	sum := sha256.Sum256(bin)
	path := filepath.Join(cacheDir, "images-"+imageLayoutVersion+"-"+hex.EncodeToString(sum[:8])+".tar")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	applets, err := busyboxApplets(ctx, busybox)
	if err != nil {
		return "", err
	}
	layout, err := imageLayout(bin, applets)
	if err != nil {
		return "", err
	}
	if err := layout.WriteFile(path); err != nil {
		return "", fmt.Errorf("build images: %w", err)
	}
	logf("built images %s and %s from %s (%d applets) into %s", PauseImage, BusyboxImage, busybox, len(applets), path)
	return path, nil
}

// busyboxApplets returns the applets the busybox binary provides.
func busyboxApplets(ctx context.Context, busybox string) ([]string, error) {
	out, err := exec.CommandContext(ctx, busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list applets of %s: %w", busybox, err)
	}
	var applets []string
	for _, name := range strings.Fields(string(out)) {
		if name != "busybox" && !strings.Contains(name, "/") {
			applets = append(applets, name)
		}
	}
	for _, want := range requiredApplets {
		if !slices.Contains(applets, want) {
			return nil, fmt.Errorf("%s lacks the %q applet the images need", busybox, want)
		}
	}
	return applets, nil
}
