package vm

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// kmodule is a loadable kernel module of the guest kernel.
type kmodule struct {
	name string // with "_", as the kernel names it
	path string // its file in the unpacked package
}

// resolveModules returns the modules to load for targets, dependencies
// first, read from the modules' own .modinfo "depends=" entries (the
// unpacked package has no modules.dep: depmod runs at installation).
// Modules built into the kernel (modules.builtin) are left out.
func resolveModules(modDir string, targets []string) ([]kmodule, error) {
	files := map[string]string{}
	err := filepath.WalkDir(filepath.Join(modDir, "kernel"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name, ok := moduleName(d.Name()); ok && !d.IsDir() {
			files[name] = path
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list kernel modules: %w", err)
	}
	builtin := map[string]bool{}
	if data, err := os.ReadFile(filepath.Join(modDir, "modules.builtin")); err == nil {
		for _, line := range strings.Fields(string(data)) {
			if name, ok := moduleName(filepath.Base(line)); ok {
				builtin[name] = true
			}
		}
	}
	var order []kmodule
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string, chain []string) error
	visit = func(name string, chain []string) error {
		name = strings.ReplaceAll(name, "-", "_")
		switch {
		case state[name] == 2 || builtin[name]:
			return nil
		case state[name] == 1:
			return fmt.Errorf("module dependency cycle: %s", strings.Join(append(chain, name), " → "))
		}
		path, ok := files[name]
		if !ok {
			return fmt.Errorf("module %s (needed by %s) is neither in the package nor built in", name, strings.Join(chain, " → "))
		}
		state[name] = 1
		deps, err := moduleDepends(path)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d, append(chain, name)); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, kmodule{name: name, path: path})
		return nil
	}
	for _, t := range targets {
		if err := visit(t, []string{"the guest"}); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// moduleName returns the module name of a module file name
// ("9pnet_virtio.ko.xz" → "9pnet_virtio"), with "-" written "_".
func moduleName(file string) (string, bool) {
	for _, ext := range []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"} {
		if name, ok := strings.CutSuffix(file, ext); ok {
			return strings.ReplaceAll(name, "-", "_"), true
		}
	}
	return "", false
}

// moduleDepends reads the "depends=" entry of a module's .modinfo section.
func moduleDepends(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tool string
	switch {
	case strings.HasSuffix(path, ".xz"):
		tool = "xz"
	case strings.HasSuffix(path, ".zst"):
		tool = "zstd"
	case strings.HasSuffix(path, ".gz"):
		tool = "gzip"
	}
	if tool != "" {
		if data, err = exec.Command(tool, "-dc", path).Output(); err != nil {
			return nil, fmt.Errorf("decompress %s: %w", path, err)
		}
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("read module %s: %w", path, err)
	}
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("module %s has no .modinfo section", path)
	}
	info, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("read .modinfo of %s: %w", path, err)
	}
	for _, entry := range bytes.Split(info, []byte{0}) {
		if v, ok := bytes.CutPrefix(entry, []byte("depends=")); ok {
			var deps []string
			for _, d := range strings.Split(string(v), ",") {
				if d != "" {
					deps = append(deps, d)
				}
			}
			return deps, nil
		}
	}
	return nil, nil
}
