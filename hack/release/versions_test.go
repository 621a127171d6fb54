package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// repo is a repository whose every place says v1.2.3.
func repo() fstest.MapFS {
	files := map[string]string{
		"deploy/kustomization.yaml": `labels:
- pairs:
    app.kubernetes.io/version: v1.2.3
    app.kubernetes.io/component: plugin
`,
		"deploy/daemonset.yaml": `spec:
  template:
    spec:
      containers:
      - name: nri-cpumanager
        image: ghcr.io/nri-cpumanager/nri-cpumanager:v1.2.3
`,
		"deploy/components/prometheus/kustomization.yaml": `labels:
- pairs:
    app.kubernetes.io/version: "v1.2.3"
`,
		"deploy/containerd-nri.toml":                 "# not YAML: ghcr.io/nri-cpumanager/nri-cpumanager:v0.0.1\n",
		"deploy/helm/nri-cpumanager/Chart.yaml":      "apiVersion: v2\nname: nri-cpumanager\nversion: 1.2.3\nappVersion: v1.2.3\n",
		"deploy/helm/nri-cpumanager/values.yaml":     "image:\n  repository: ghcr.io/nri-cpumanager/nri-cpumanager\n  tag: \"\"\n  digest: \"\"\n",
		"deploy/helm/nri-cpumanager/templates/x.yml": "app.kubernetes.io/version: {{ .Chart.AppVersion }}\n",
		"docs/install.md":                            "# Installing\n\n```sh\nVERSION=v1.2.3\ncurl …/$VERSION/…\n```\n",
	}
	fsys := fstest.MapFS{}
	for name, text := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(text)}
	}
	return fsys
}

// with returns repo() with file's old text replaced by new.
func with(t *testing.T, file, old, new string) fstest.MapFS {
	t.Helper()
	fsys := repo()
	f, ok := fsys[file]
	if !ok {
		fsys[file] = &fstest.MapFile{Data: []byte(new)}
		return fsys
	}
	text := string(f.Data)
	if !strings.Contains(text, old) {
		t.Fatalf("%s has no %q", file, old)
	}
	fsys[file] = &fstest.MapFile{Data: []byte(strings.Replace(text, old, new, 1))}
	return fsys
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		fsys fstest.MapFS
		tag  string
		// want: substrings of the error, each; none for no error.
		want []string
	}{
		{name: "every place says the tag", fsys: repo(), tag: "v1.2.3"},
		{name: "a pre-release", tag: "v1.2.3-rc.1", fsys: func() fstest.MapFS {
			f := repo()
			for name, file := range f {
				if name != "deploy/containerd-nri.toml" {
					file.Data = []byte(strings.ReplaceAll(string(file.Data), "1.2.3", "1.2.3-rc.1"))
				}
			}
			return f
		}()},
		{name: "another tag", fsys: repo(), tag: "v1.2.4", want: []string{
			`deploy/daemonset.yaml:6: image tag "v1.2.3", want "v1.2.4"`,
			`deploy/kustomization.yaml:3: label app.kubernetes.io/version "v1.2.3", want "v1.2.4"`,
			`deploy/components/prometheus/kustomization.yaml:3: label app.kubernetes.io/version "v1.2.3", want "v1.2.4"`,
			`Chart.yaml:3: chart version "1.2.3", want "1.2.4"`,
			`Chart.yaml:4: chart appVersion "v1.2.3", want "v1.2.4"`,
			`docs/install.md:4: VERSION= of the install commands "v1.2.3", want "v1.2.4"`,
		}},
		{name: "the image left behind", fsys: with(t, "deploy/daemonset.yaml", ":v1.2.3", ":v1.2.2"), tag: "v1.2.3",
			want: []string{`deploy/daemonset.yaml:6: image tag "v1.2.2", want "v1.2.3"`}},
		{name: "a component's label left behind", fsys: with(t, "deploy/components/prometheus/kustomization.yaml", "v1.2.3", "v1.2.2"), tag: "v1.2.3",
			want: []string{`deploy/components/prometheus/kustomization.yaml:3: label`}},
		{name: "a new manifest with the image", fsys: with(t, "deploy/components/doctor/job.yaml", "", "      image: 'ghcr.io/nri-cpumanager/nri-cpumanager:v1.0.0@sha256:00'\n"), tag: "v1.2.3",
			want: []string{`deploy/components/doctor/job.yaml:1: image tag "v1.0.0", want "v1.2.3"`}},
		{name: "comments do not count", fsys: with(t, "deploy/daemonset.yaml", "spec:\n", "# was ghcr.io/nri-cpumanager/nri-cpumanager:v0.9.0\nspec:\n"), tag: "v1.2.3"},
		{name: "the chart's version with a v", fsys: with(t, "deploy/helm/nri-cpumanager/Chart.yaml", "version: 1.2.3", "version: v1.2.3"), tag: "v1.2.3",
			want: []string{`chart version "v1.2.3", want "1.2.3"`}},
		{name: "the chart's appVersion without one", fsys: with(t, "deploy/helm/nri-cpumanager/Chart.yaml", "appVersion: v1.2.3", "appVersion: 1.2.3"), tag: "v1.2.3",
			want: []string{`chart appVersion "1.2.3", want "v1.2.3"`}},
		{name: "values pin a tag", fsys: with(t, "deploy/helm/nri-cpumanager/values.yaml", `tag: ""`, `tag: v1.2.2`), tag: "v1.2.3",
			want: []string{`values.yaml: image.tag (leave it empty: the appVersion) "v1.2.2"`}},
		{name: "values pin a digest", fsys: with(t, "deploy/helm/nri-cpumanager/values.yaml", `digest: ""`, `digest: sha256:abc`), tag: "v1.2.3",
			want: []string{`image.digest (leave it empty: the release sets it) "sha256:abc"`}},
		{name: "the docs install another version", fsys: with(t, "docs/install.md", "VERSION=v1.2.3", "export VERSION=v1.2.0"), tag: "v1.2.3",
			want: []string{`docs/install.md:4: VERSION= of the install commands "v1.2.0"`}},
		{name: "no image found", fsys: with(t, "deploy/daemonset.yaml", "image: ghcr.io/nri-cpumanager/nri-cpumanager:v1.2.3", "image: example.com/other:v1.2.3"), tag: "v1.2.3",
			want: []string{"deploy/daemonset.yaml: no image tag found"}},
		{name: "no label found", fsys: with(t, "deploy/kustomization.yaml", "app.kubernetes.io/version: v1.2.3", "app.kubernetes.io/name: x"), tag: "v1.2.3",
			want: []string{"deploy/kustomization.yaml: no label app.kubernetes.io/version found"}},
		{name: "no VERSION in the docs", fsys: with(t, "docs/install.md", "VERSION=v1.2.3", "V=v1.2.3"), tag: "v1.2.3",
			want: []string{"docs/install.md: no VERSION= of the install commands found"}},
		{name: "without v", fsys: repo(), tag: "1.2.3", want: []string{`tag "1.2.3" is not a release tag`}},
		{name: "two numbers", fsys: repo(), tag: "v1.2", want: []string{"not a release tag"}},
		{name: "four numbers", fsys: repo(), tag: "v1.2.3.4", want: []string{"not a release tag"}},
		{name: "a leading zero", fsys: repo(), tag: "v01.2.3", want: []string{"not a release tag"}},
		{name: "build metadata", fsys: repo(), tag: "v1.2.3+abc", want: []string{"not a release tag"}},
		{name: "an empty pre-release", fsys: repo(), tag: "v1.2.3-", want: []string{"not a release tag"}},
		{name: "a branch name", fsys: repo(), tag: "main", want: []string{"not a release tag"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.fsys, tc.tag)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Check(%s): %v", tc.tag, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check(%s) passed, want an error with %q", tc.tag, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check(%s) = %v\nwant it to say %q", tc.tag, err, w)
				}
			}
		})
	}
}

func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fsys    fstest.MapFS
		want    string
		wantErr string
	}{
		{name: "agreed", fsys: repo(), want: "v1.2.3"},
		{name: "the image differs", fsys: with(t, "deploy/daemonset.yaml", ":v1.2.3", ":v1.2.4"), wantErr: `image tag "v1.2.4", want "v1.2.3"`},
		{name: "the chart's version differs", fsys: with(t, "deploy/helm/nri-cpumanager/Chart.yaml", "version: 1.2.3", "version: 1.3.0"), wantErr: `chart version "1.3.0", want "1.2.3"`},
		{name: "an appVersion that is no release", fsys: with(t, "deploy/helm/nri-cpumanager/Chart.yaml", "appVersion: v1.2.3", "appVersion: latest"), wantErr: "not a release tag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Version(tc.fsys)
			if tc.wantErr == "" {
				if err != nil || got != tc.want {
					t.Fatalf("Version() = %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Version() = %q, %v; want an error with %q", got, err, tc.wantErr)
			}
		})
	}
}

// TestTheRepositoryIsReleasable checks this repository: deploy/, the chart
// and docs/install.md name one version, so a tag of it passes the release
// workflow's check. A version bumped in one place only fails here, long
// before a tag.
func TestTheRepositoryIsReleasable(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fsys := os.DirFS(root)
	v, err := Version(fsys)
	if err != nil {
		t.Fatalf("the repository does not name one version: %v", err)
	}
	places, err := Places(fsys)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range places {
		t.Logf("%s", p)
	}
	if len(places) < len(required) {
		t.Errorf("%d places, fewer than the %d required", len(places), len(required))
	}
	if err := Check(fsys, v); err != nil {
		t.Error(err)
	}
}
