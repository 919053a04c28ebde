#!/bin/bash
# Builds the test PostgreSQL 15 image from Debian's packages and imports it
# into a container engine:
#
#   build.sh ENGINE TAG [ALIAS]   (ENGINE: podman or docker)
#
# The root is a debootstrap minbase of Debian bookworm with postgresql-15,
# from the Debian mirror apt already uses (DEBIAN_MIRROR overrides it); no
# image registry is involved. When ENGINE already has TAG it does nothing:
# the Makefile names TAG by a hash of this script and entrypoint.sh, so the
# image is rebuilt only when they change. ALIAS, a second name given to the
# image either way, is what docker-compose.yml names by default. Needs root (debootstrap) and about
# 700 MB of free space in TMPDIR while it runs. A first build took 1.5 to 3
# minutes on a busy 2-core machine (debootstrap most of it).
set -euo pipefail

engine=${1:?usage: build.sh ENGINE TAG [ALIAS]}
tag=${2:?usage: build.sh ENGINE TAG [ALIAS]}
alias=${3:-}
here=$(cd "$(dirname "$0")" && pwd)

case "$engine" in
	podman|docker) ;;
	*) echo "build.sh: unknown container engine '$engine' (podman or docker)" >&2; exit 2 ;;
esac
if "$engine" image inspect "$tag" >/dev/null 2>&1; then
	echo "image $tag is up to date ($engine)"
	[ -z "$alias" ] || "$engine" tag "$tag" "$alias"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "build.sh: debootstrap needs root; run as root or with sudo" >&2
	exit 2
fi
command -v debootstrap >/dev/null || { echo "build.sh: debootstrap is missing (apt-get install debootstrap)" >&2; exit 2; }

mirror=${DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
	# The first http(s) Debian mirror of the host's apt sources, else Debian's CDN.
	mirror=$(grep -rhoE '^(deb|URIs:)[^#]*https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
		| grep -oE 'https?://[^ ]+' | head -n1 || true)
	mirror=${mirror:-http://deb.debian.org/debian}
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/pgimage.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root

start=$SECONDS
echo "debootstrap bookworm + postgresql-15 from $mirror"
debootstrap --variant=minbase --include=postgresql-15 bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
	tail -n 30 "$work/debootstrap.log" >&2
	exit 1
}

# The package's postinst made a cluster "main"; the entrypoint makes its own.
rm -rf "$root"/var/lib/postgresql/15/main "$root"/etc/postgresql/15/main
# Trim what a server does not need.
rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
	"$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
find "$root"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} +
install -m 0755 "$here/entrypoint.sh" "$root"/usr/local/bin/docker-entrypoint.sh
mkdir -p "$root"/docker-entrypoint-initdb.d

echo "import into $engine as $tag"
tar -C "$root" --numeric-owner -c . | "$engine" import \
	--change 'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change 'ENV PGDATA=/var/lib/postgresql/data' \
	--change 'ENV LANG=C.UTF-8' \
	--change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
	--change 'CMD ["postgres"]' \
	--change 'EXPOSE 5432' \
	--change 'STOPSIGNAL SIGINT' \
	- "$tag" >/dev/null
[ -z "$alias" ] || "$engine" tag "$tag" "$alias"
echo "built $tag in $((SECONDS - start)) s"
