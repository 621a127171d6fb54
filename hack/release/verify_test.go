package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCheckSums(t *testing.T) {
	a, b := "a\n", "b\n"
	line := func(name, text string) string { return sha256Hex([]byte(text)) + "  " + name + "\n" }
	for _, tc := range []struct {
		name, sums, want string
	}{
		{name: "every file, right", sums: line("a", a) + line("b", b)},
		{name: "a wrong sum", sums: line("a", a) + line("b", "c\n"), want: "the sum of b is wrong"},
		{name: "a file left out", sums: line("a", a), want: "does not list b"},
		{name: "a file that is not released", sums: line("a", a) + line("b", b) + line("c", "c\n"), want: "lists c, which is not released"},
		{name: "a file twice", sums: line("a", a) + line("a", a) + line("b", b), want: "lists a twice"},
		{name: "not sha256sum's format", sums: "abc a\n", want: "is not sha256sum's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"a": a, "b": b, sumsFile: tc.sums})
			err := checkSums(dir, []string{sumsFile, "a", "b"})
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("checkSums: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCheckManifest(t *testing.T) {
	const digest = "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	want := Want{Image: "registry.example/nri-cpumanager", Version: "v1.2.3", Revision: "abc"}
	manifest := func(image, version string) string {
		return `apiVersion: v1
kind: Namespace
metadata:
  name: nri-cpumanager
  labels: {app.kubernetes.io/version: v1.2.3}
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: nri-cpumanager
  labels: {app.kubernetes.io/version: ` + version + `}
spec:
  template:
    spec:
      containers:
      - name: nri-cpumanager
        image: ` + image + `
`
	}
	for _, tc := range []struct {
		name, manifest, want string
	}{
		{name: "pinned by digest", manifest: manifest(want.Image+"@"+digest, "v1.2.3")},
		{name: "by tag", manifest: manifest(want.Image+":v1.2.3", "v1.2.3"), want: "want one running " + want.Image + "@" + digest},
		{name: "another digest", manifest: manifest(want.Image+"@sha256:00", "v1.2.3"), want: "want one running"},
		{name: "the repository in git", manifest: manifest(Image+"@"+digest, "v1.2.3"), want: "want one running"},
		{name: "another version label", manifest: manifest(want.Image+"@"+digest, "v1.2.2"), want: `DaemonSet nri-cpumanager is labelled version "v1.2.2"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{manifestFile: tc.manifest})
			_, err := checkManifest(dir, want, digest)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("checkManifest: %v, want %q", err, tc.want)
			}
		})
	}
}
