# syntax=docker/dockerfile:1
#
# The plugin's image: one static binary on distroless/static. From the
# repository's root, for both architectures:
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=v0.1.0 --build-arg REVISION=$(git rev-parse HEAD) \
#     -t ghcr.io/nri-cpumanager/nri-cpumanager:v0.1.0 .
#
# The build stage runs on the builder's own platform and cross-compiles for
# the target one (CGO_ENABLED=0: no C toolchain per architecture, no
# emulation).
ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
ARG REVISION=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" \
      -o /out/nri-cpumanager ./cmd/nri-cpumanager

FROM gcr.io/distroless/static-debian12
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="nri-cpumanager" \
      org.opencontainers.image.description="NRI plugin for containerd: exclusive CPUs and in-place CPU resize for Kubernetes pods" \
      org.opencontainers.image.url="https://github.com/nri-cpumanager/nri-cpumanager" \
      org.opencontainers.image.source="https://github.com/nri-cpumanager/nri-cpumanager" \
      org.opencontainers.image.documentation="https://github.com/nri-cpumanager/nri-cpumanager/tree/main/docs" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/nri-cpumanager /usr/bin/nri-cpumanager
# Root, not distroless's nonroot user: the plugin dials containerd's NRI
# socket, which lives in a directory only root may enter. The DaemonSet
# takes the rest away (no capability, no privilege escalation, read-only
# root filesystem, RuntimeDefault seccomp).
USER 0:0
ENTRYPOINT ["/usr/bin/nri-cpumanager"]
CMD ["run", "--config", "/etc/nri-cpumanager/config.yaml"]
