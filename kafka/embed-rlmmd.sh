#!/usr/bin/env bash
# Builds the rlmmd binaries the plugin jar carries for its embedded mode
# (docs/KAFKA.md, "Deploying"): linux/amd64 and linux/arm64, static (no
# cgo), stripped, from this checkout, each with the SHA-256 digest the
# plugin checks before it runs one, and the version both report.
#
#   embed-rlmmd.sh OUTDIR PROJECT_VERSION [ARCH...]
#
# ARCH defaults to amd64 and arm64. The tag grpcnotrace leaves out gRPC's
# x/net/trace (and html/template with it), which rlmmd never serves: the
# binary is 2.9 MB smaller, and its resident code 1.9 MB (docs/BENCHMARKS.md,
# "The embedded mode").
#
# OUTDIR/io/github/krabka/remotestorage/kafka/rlmmd/ receives VERSION and
# linux-<arch>/rlmmd with linux-<arch>/rlmmd.sha256. The version is the
# plugin's project version and the commit, e.g. 0.1.0+9fd5f96c1a2b.
set -euo pipefail
out=$1
project_version=$2
shift 2
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(amd64 arm64)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
version="$project_version+$commit"
dir="$out/io/github/krabka/remotestorage/kafka/rlmmd"
mkdir -p "$dir"
for arch in "${archs[@]}"; do
	mkdir -p "$dir/linux-$arch"
	(cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=false -tags grpcnotrace \
		-ldflags "-s -w -X main.version=$version" -o "$dir/linux-$arch/rlmmd" ./cmd/rlmmd)
	(cd "$dir/linux-$arch" && sha256sum rlmmd | cut -d' ' -f1 > rlmmd.sha256)
done
printf '%s\n' "$version" > "$dir/VERSION"
echo "embed-rlmmd: rlmmd $version for linux-amd64 and linux-arm64 into $dir"
