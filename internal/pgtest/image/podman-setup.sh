#!/bin/bash
# Makes podman run containers as root on a Debian bookworm machine with no
# Docker engine, as CI's machines are: installs podman, runc, debootstrap
# and podman-compose when missing (one apt-get update, only then), and
# writes a containers.conf drop-in:
#   - runtime = "runc": crun fails there ("cgroups in hybrid mode not supported");
#   - cgroup_manager = "cgroupfs": no systemd;
#   - default_ulimits = []: setting the default ulimits needs CAP_SYS_RESOURCE,
#     which the machine's root lacks.
# Then starts podman's Docker-compatible API service (engine.sh service).
# Where a Docker daemon answers it does nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
	echo "a Docker daemon answers: podman is not needed"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "podman-setup.sh: run as root (it installs packages and writes /etc/containers)" >&2
	exit 2
fi

missing=()
for tool in podman runc debootstrap podman-compose; do
	command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "installing ${missing[*]} (apt-get)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap podman-compose >/dev/null
fi

conf=/etc/containers/containers.conf.d/50-remotestorage.conf
mkdir -p "$(dirname "$conf")"
cat >"$conf" <<'CONF'
# Written by remotestorage's internal/pgtest/image/podman-setup.sh.
[containers]
default_ulimits = []

[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
CONF
echo "podman $(podman version --format '{{.Client.Version}}'): runtime $(podman info --format '{{.Host.OCIRuntime.Name}}'), cgroup manager $(podman info --format '{{.Host.CgroupManager}}') ($conf)"

CONTAINER_ENGINE=podman "$here/engine.sh" service
