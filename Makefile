# nri-cpumanager — see README.md.
GO      ?= go
OUTPUT  ?= $(CURDIR)/_output
BIN     := $(OUTPUT)/bin
PKGS    := ./...
# A count, not a duration: with a duration, Go's fuzz coordinator can report a
# spurious "context deadline exceeded" when the deadline races a worker that is
# mid-execution (golang/go#75804, fixed only in Go 1.27). A count has no deadline.
# make test's fuzz is a smoke run, 100 000 inputs per target (about a minute
# for all seven); a soak is FUZZTIME=10000000x.
FUZZTIME ?= 100000x
# Go minimizes every new interesting input for up to a minute by default; on
# config's FuzzParse that was two of make test's minutes (inputs as found are
# kept either way). A count again, for the same reason.
FUZZMINIMIZE ?= 2000x
# staticcheck, pinned; `go run` fetches it through the module proxy.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
# $(call tool,NAME): a tool pinned in hack/tools/NAME/go.mod (hack/tools/README.md).
tool = $(GO) tool -modfile=$(CURDIR)/hack/tools/$(1)/go.mod $(1)
# The build cache: what the suites build from pinned versions (containerd,
# Kubernetes, etcd, the VM's kernel, root file system and initramfs), outside
# the checkout so that every clone on this machine shares it (make clean-cache;
# docs/development.md). The Go-built tools (staticcheck, promtool, actionlint,
# helm) live in Go's own build cache, `go env GOCACHE`, also outside.
NRI_CPUMANAGER_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/nri-cpumanager
export NRI_CPUMANAGER_CACHE
# The Kubernetes module's packages compile once for the placement and lifecycle
# comparisons, its go vet and the Kubernetes binaries of the e2e suites only
# with the same flags: static, as the binaries are built (test/e2e/harness).
KUBE_GO ?= CGO_ENABLED=0 $(GO)
# promtool, where hack/debian-promtool finds no Debian package to unpack, built
# without Prometheus's service discoveries (cloud SDKs it does not need to test
# rules): minutes less to build; test/deploy/promtool_test.go runs it so.
PROMTOOL_FLAGS := GOFLAGS=-tags=remove_all_sd
# The image's archive (make image) and where make push-image pushes it.
IMAGE_ARCHIVE ?= $(OUTPUT)/image/nri-cpumanager.tar
IMAGE ?=
IMAGE_FLAGS ?=

.PHONY: all build image push-image release-dry-run check test clean-cache unit placement-diff lifecycle-diff lifecycle-soak kubelet-checkpoints fuzz e2e e2e-kube e2e-vm e2e-vm-kube vm-shell deploy-test chart-readme bench bench-all bench-kubelet lint demo clean

all: build

## build: the plugin binary into _output/bin
build:
	$(GO) build -o $(BIN)/nri-cpumanager ./cmd/nri-cpumanager

## image: the plugin's image as an OCI layout archive (linux/amd64 and
## linux/arm64, version from git), no Docker needed; load it on a node with
## ctr -n k8s.io images import _output/image/nri-cpumanager.tar
## (IMAGE_FLAGS="-tag v0.1.0" names it as the manifests do; go run ./hack/image -h)
image:
	$(GO) run ./hack/image -o $(IMAGE_ARCHIVE) $(IMAGE_FLAGS)

## push-image: push the archive of make image, every platform under one index,
## to IMAGE=registry.example.com/nri-cpumanager:v0.1.0 (log in first:
## go tool -modfile=hack/tools/regctl/go.mod regctl registry login REGISTRY)
push-image:
	@if [ -z "$(IMAGE)" ]; then echo "usage: make push-image IMAGE=registry.example.com/nri-cpumanager:TAG" >&2; exit 2; fi
	@if [ ! -f "$(IMAGE_ARCHIVE)" ]; then echo "$(IMAGE_ARCHIVE) is missing: run make image first" >&2; exit 1; fi
	$(call tool,regctl) image import "$(IMAGE)" "$(IMAGE_ARCHIVE)"
	$(call tool,regctl) manifest get "$(IMAGE)" --format '{{range .Manifests}}{{println .Platform.OS .Platform.Architecture .Digest}}{{end}}'

## release-dry-run: the release workflow (.github/workflows/release.yaml) on
## this machine, without GitHub or a registry: actionlint, the tag check
## (the version deploy/, the chart and docs/install.md name), every release
## file built into _output/release and verified (hack/release-artifacts),
## the image pushed to a local OCI layout; lists the pushes and signatures
## it skips (docs/development.md, "Releasing"); in make test (30-45 s warm)
release-dry-run:
	GO=$(GO) hack/release-dry-run

## check: the quick tier to run before every commit, no root needed, a few
## minutes (1m30s measured with warm caches): gofmt, go vet and staticcheck of the
## plugin's module, and its tests (unit and integration, without the race
## detector); make test is the full tier, CI's
check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)
	$(GO) test -count=1 $(PKGS)

## test: everything CI runs — lint, unit + integration (race detector), the
## placement and lifecycle comparisons with the kubelet, fuzz, deploy manifests,
## the release dry run, e2e, e2e-kube, and the VM suite (e2e-vm, e2e-vm-kube) —
## printing each target's time at the end
TEST_TARGETS := lint unit placement-diff lifecycle-diff kubelet-checkpoints fuzz deploy-test e2e e2e-kube e2e-vm e2e-vm-kube
test:
	@MAKE="$(MAKE)" hack/timed-make $(TEST_TARGETS)

unit:
	$(GO) test -race -count=1 $(PKGS)
	cd test/e2e && $(GO) test -race -count=1 ./...

## placement-diff: the allocator against the kubelet's static policy on the same
## random states (test/kubernetes, its own module); prints the comparison table
placement-diff:
	cd test/kubernetes && $(KUBE_GO) test -count=1 -v ./placement/...

## lifecycle-diff: random pod lives (init containers, sidecars, interleaved
## starts, crashes, containers down across other events, sandbox re-creation,
## reboots, restarts, Jobs, resizes, waits) played on the kubelet's topology
## and CPU managers and on the plugin over NRI, on five node configurations,
## compared CPU for CPU after every action; 20 000 actions with the plugin
## watching the Kubernetes API per seed of LIFECYCLE_SEEDS: "new" is a
## fresh seed at every run (printed, with the command that replays a
## failing life), the numbers are seeds that found divergences since fixed
## (a regression gate)
LIFECYCLE_SEEDS ?= new 7 10
lifecycle-diff:
	@set -e; cd test/kubernetes && for seed in $(LIFECYCLE_SEEDS); do \
	  if [ "$$seed" = new ]; then seed=; fi; \
	  LIFECYCLE_API=on LIFECYCLE_SEED=$$seed $(KUBE_GO) test -count=1 -v -timeout 30m -run '^TestLifecycleMatchesTheKubelet$$' ./lifecycle/; \
	done

## lifecycle-soak: a million actions of a new seed with the API, as the
## DaemonSet runs (about 35 minutes; not in make test);
## LIFECYCLE_SOAK_API=off plays the mode without the API instead, =both
## both: that mode decides per container and still differs from the
## kubelet where docs/development.md says
LIFECYCLE_SOAK_API ?= on
lifecycle-soak:
	cd test/kubernetes && LIFECYCLE_API=$(LIFECYCLE_SOAK_API) LIFECYCLE_ACTIONS=1000000 $(KUBE_GO) test -count=1 -v -timeout 6h -run '^TestLifecycleMatchesTheKubelet$$' ./lifecycle/

## kubelet-checkpoints: the plugin's export for the kubelet and its import of
## the kubelet's checkpoint against the kubelet's own code: v1.36.3's
## checkpoint and static policy (test/kubernetes) and v1.37.2's checkpoint,
## format V4 (test/kubelet137, its own module)
kubelet-checkpoints:
	cd test/kubernetes && $(KUBE_GO) test -count=1 -v -run '^(TestKubeletStartsOnTheExport|TestV4Export)$$' ./lifecycle/
	cd test/kubelet137 && $(KUBE_GO) test -count=1 -v ./...

## fuzz: each fuzz target briefly (the seed corpora always run in `unit`)
FUZZPKGS ?= ./state/ ./config/ ./plugin/ ./cpuallocator/internal/sysfs/
fuzz:
	@set -e; for pkg in $(FUZZPKGS); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
		echo "fuzz $$pkg $$target, -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE)"; \
		$(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $$pkg; \
	  done; done

## e2e: real containerd + runc on this machine (installs what it needs;
## test/e2e is a module of its own, so its harness's dependencies stay out of
## the plugin's module)
e2e:
	cd test/e2e && $(GO) test -tags e2e -count=1 -timeout 40m -v -skip '^TestKubernetes$$' . ./harness/

## e2e-vm: a production-shaped node in QEMU (16 vCPUs, 2 sockets, SMT 2, 2 NUMA
## nodes with a PCI disk each, cgroup v2): containerd + runc + the plugin under the cgroupfs driver
## and with isolcpus=, and the demo; the systemd driver is e2e-vm-kube's (root;
## builds its kernel, root file system and initramfs from Debian packages into
## the build cache; KVM where it works, else emulation)
e2e-vm:
	cd test/e2e && $(GO) test -tags e2e -count=1 -timeout 90m -v -run '^TestVM$$' ./vm/

## e2e-vm-kube: a real kubelet v1.36.3 (systemd driver, cgroup v2) in that guest,
## the plugin as the DaemonSet of deploy/: a pod resized 2 -> 6 -> 2, a
## multi-container resize refused as a whole, and pod lives (init container,
## sidecar, kills, sandbox re-creation, restarts, a Job), and a device plugin's
## device on NUMA node 1 under single-numa-node
e2e-vm-kube:
	cd test/e2e && $(GO) test -tags e2e -count=1 -timeout 120m -v -run '^TestVMKubernetes$$' ./vm/

## vm-shell: boot that guest with a shell on this terminal (VM_INIT=systemd for
## systemd as init; VM_CMDLINE=isolcpus=12-15 for kernel parameters)
vm-shell:
	cd test/e2e && $(GO) run ./vm/shell

## e2e-kube: a real single-node Kubernetes v1.36.3 on that containerd, the
## plugin as the DaemonSet of deploy/ (builds Kubernetes and etcd into the
## build cache once per version: minutes, once per machine)
e2e-kube:
	cd test/e2e && $(GO) test -tags e2e -count=1 -timeout 60m -v -run '^TestKubernetes$$' .

## deploy-test: the kustomize manifests, the Helm chart and its README, alerts
## (through promtool) and dashboard (a module of its own, so the plugin's
## module does not depend on Helm)
deploy-test:
	@promtool=$$(hack/debian-promtool || echo "debian-promtool failed; the pinned promtool is built instead" >&2) && \
	if [ -z "$$promtool" ]; then $(PROMTOOL_FLAGS) $(call tool,promtool) --version >/dev/null || exit 1; fi && \
	echo "promtool: $${promtool:-hack/tools/promtool, built from source}" && \
	cd test/deploy && PROMTOOL="$$promtool" $(GO) test -count=1 -timeout 20m ./...

## chart-readme: regenerate deploy/helm/nri-cpumanager/README.md from the
## comments of its values.yaml (deploy-test fails while it is stale)
chart-readme:
	cd test/deploy && $(GO) test -count=1 -run '^TestChartReadme$$' . -update

## bench: the policy's decisions at 64/512/4096 CPUs with 10/100/500
## containers beside the allocator's part (BenchmarkDecisionScale), then the
## allocator's benchmarks; prints each decision's cost over the allocator's
## and its growth from 10 to 500 containers, a growth above 2× on a line
## starting with GROWTH (hack/benchreport: a report, never a failure; a few
## minutes)
BENCHTIME ?= 0.5s
bench:
	@mkdir -p $(OUTPUT)
	$(GO) test -run '^$$' -bench 'BenchmarkDecisionScale' -benchtime $(BENCHTIME) -benchmem ./policy/ > $(OUTPUT)/bench-decisions.txt; \
		status=$$?; cat $(OUTPUT)/bench-decisions.txt; exit $$status
	$(GO) run ./hack/benchreport < $(OUTPUT)/bench-decisions.txt
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -benchmem ./cpuallocator/

## bench-all: every benchmark of the plugin's module (allocator, policy,
## state commits, the NRI round trip)
bench-all:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

## bench-kubelet: the policy's decisions against the kubelet v1.36.3 static
## policy in one process (test/kubernetes/decisions): ratios of medians at
## 64/512/4096 CPUs with 10/100/500 containers (VERSUS_KUBELET_CPUS=512
## for one machine; a report, nothing asserted; about a minute warm)
bench-kubelet:
	cd test/kubernetes && VERSUS_KUBELET=1 $(KUBE_GO) test -count=1 -timeout 60m -run '^TestVersusKubelet$$' -v ./decisions/

## lint: gofmt, go vet and staticcheck (also of test/e2e with its build tags
## e2e and vmguest, which no file negates: every file of test/e2e once, and of
## test/deploy; go vet of test/kubernetes
## and test/kubelet137),
## actionlint of .github/workflows
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)
	@if grep -rlE '^//go:build.*!' --include='*.go' test/e2e; then echo "test/e2e: a negated build tag: lint checks the module once, with -tags e2e,vmguest"; exit 1; fi
	cd test/e2e && $(GO) vet -tags e2e,vmguest ./... && $(STATICCHECK) -tags e2e,vmguest ./...
	cd test/deploy && $(GO) vet ./... && $(STATICCHECK) ./...
	cd test/kubernetes && $(KUBE_GO) vet ./...
	cd test/kubelet137 && $(KUBE_GO) vet ./...
	$(call tool,actionlint)

## demo: a real containerd + the plugin on this machine: pin, resize, refusals (root)
demo:
	cd test/e2e && $(GO) run ./demo

## clean: remove _output (the build cache stays: make clean-cache)
clean:
	rm -rf $(OUTPUT)

## clean-cache: empty the build cache ($$NRI_CPUMANAGER_CACHE); the next run
## builds containerd, Kubernetes, etcd and the VM's guest again (go clean
## -cache empties Go's, which holds the compiled packages and the tools)
clean-cache:
	rm -rf "$(NRI_CPUMANAGER_CACHE)"
