#!/bin/bash
# Builds the rlmmd image: a static rlmmd (CGO_ENABLED=0, -tags grpcnotrace,
# as kafka/embed-rlmmd.sh builds it) into a temporary context with the
# Containerfile, then `ENGINE build` FROM scratch (no registry is needed).
# Docker image format, so that the HEALTHCHECK is kept (OCI has no field
# for it).
#
#   deploy/image/build.sh ENGINE IMAGE [ALIAS]
set -euo pipefail
engine=${1:?usage: build.sh ENGINE IMAGE [ALIAS]}
image=${2:?usage: build.sh ENGINE IMAGE [ALIAS]}
alias=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

version=$(git -C "$root" describe --always --dirty 2>/dev/null || echo dev)
(cd "$root" && CGO_ENABLED=0 ${GO:-go} build -tags grpcnotrace -trimpath \
	-ldflags "-s -w -X main.version=$version" -o "$ctx/rlmmd" ./cmd/rlmmd)
cp "$here/Containerfile" "$ctx/Containerfile"
format=()
if [ "$engine" = podman ]; then
	format=(--format docker) # docker's builder writes that format anyway
fi
"$engine" build "${format[@]}" --label org.opencontainers.image.version="$version" -t "$image" -f "$ctx/Containerfile" "$ctx"
if [ -n "$alias" ]; then
	"$engine" tag "$image" "$alias"
fi
echo "built $image ($version)${alias:+, also $alias}"
