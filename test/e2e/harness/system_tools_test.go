package harness

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// writeELF writes a minimal 64-bit ELF executable whose program headers
// are of the given types.
func writeELF(t *testing.T, progs ...elf.ProgType) string {
	t.Helper()
	const ehsize, phsize = 64, 56
	var buf bytes.Buffer
	hdr := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Phoff: ehsize, Ehsize: ehsize, Phentsize: phsize, Phnum: uint16(len(progs)),
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS], hdr.Ident[elf.EI_DATA], hdr.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	if err := binary.Write(&buf, binary.LittleEndian, hdr); err != nil {
		t.Fatal(err)
	}
	for _, typ := range progs {
		if err := binary.Write(&buf, binary.LittleEndian, elf.Prog64{Type: uint32(typ)}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "exe")
	if err := os.WriteFile(path, buf.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestIsStaticELF(t *testing.T) {
	static, err := isStaticELF(writeELF(t, elf.PT_LOAD))
	if err != nil || !static {
		t.Errorf("ELF without interpreter: static %v, %v; want true", static, err)
	}
	static, err = isStaticELF(writeELF(t, elf.PT_PHDR, elf.PT_INTERP, elf.PT_LOAD))
	if err != nil || static {
		t.Errorf("ELF with interpreter: static %v, %v; want false", static, err)
	}
	script := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := isStaticELF(script); err == nil {
		t.Error("a shell script was taken for an ELF binary")
	}
}
