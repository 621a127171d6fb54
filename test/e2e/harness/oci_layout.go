package harness

import (
	"runtime"

	"github.com/nri-cpumanager/nri-cpumanager/hack/ocilayout"
)

// imageLayout returns an OCI image layout with both images, which share
// one uncompressed layer holding busybox and its applet links.
func imageLayout(busybox []byte, applets []string) (*ocilayout.Layout, error) {
	layer, err := busyboxLayer(busybox, applets)
	if err != nil {
		return nil, err
	}
	layout := ocilayout.New()
	for _, name := range []string{PauseImage, BusyboxImage} {
		img := ocilayout.Image{
			Platform: ocilayout.Platform{OS: "linux", Architecture: runtime.GOARCH},
			Layers:   []ocilayout.Layer{layer},
		}
		img.Config.Config.Env = []string{"PATH=" + systemPath}
		img.Config.Config.Cmd = imageCommands[name]
		img.Config.Config.WorkingDir = "/"
		if _, err := layout.AddImage(name, img); err != nil {
			return nil, err
		}
	}
	return layout, nil
}

// busyboxLayer returns a layer with the usual top-level directories,
// /bin/busybox and a symlink to it for every applet.
func busyboxLayer(busybox []byte, applets []string) (ocilayout.Layer, error) {
	entries := []ocilayout.Entry{
		{Path: "bin", Mode: 0o755, Dir: true}, {Path: "dev", Mode: 0o755, Dir: true},
		{Path: "etc", Mode: 0o755, Dir: true}, {Path: "proc", Mode: 0o555, Dir: true},
		{Path: "root", Mode: 0o700, Dir: true}, {Path: "sys", Mode: 0o555, Dir: true},
		{Path: "tmp", Mode: 0o1777, Dir: true},
		{Path: "bin/busybox", Mode: 0o755, Data: busybox},
	}
	for _, applet := range applets {
		entries = append(entries, ocilayout.Entry{Path: "bin/" + applet, Mode: 0o777, Link: "busybox"})
	}
	return ocilayout.NewLayer(entries, false)
}
