#!/bin/bash
# The container engine behind `make image`, `make test-container`, `make
# db-up` and `make db-down`: Docker when a Docker daemon answers, else podman.
#
#   engine.sh name          print docker or podman (CONTAINER_ENGINE overrides)
#   engine.sh service       podman: make sure its Docker-compatible API service
#                           answers on PODMAN_SOCKET, starting it when it
#                           does not; docker: check the daemon answers
#   engine.sh docker-host   print the DOCKER_HOST testcontainers should use
#   engine.sh compose ARGS  docker compose, podman compose, or podman-compose
#   engine.sh db-up         start docker-compose.yml's database, wait until
#                           it accepts TCP connections
#   engine.sh db-down       stop it and delete its data
set -euo pipefail
cd "$(dirname "$0")/../../.."

# Root's podman API socket; rootless podman serves $XDG_RUNTIME_DIR/podman/podman.sock.
if [ "$(id -u)" = 0 ]; then
	default_socket=/run/podman/podman.sock
else
	default_socket=${XDG_RUNTIME_DIR:-/run/user/$(id -u)}/podman/podman.sock
fi
PODMAN_SOCKET=${PODMAN_SOCKET:-$default_socket}

name() {
	if [ -n "${CONTAINER_ENGINE:-}" ]; then
		echo "$CONTAINER_ENGINE"
	elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
		echo docker
	elif command -v podman >/dev/null 2>&1; then
		echo podman
	else
		echo "engine.sh: no container engine: no Docker daemon answers and podman is not installed" >&2
		echo "  (Debian: apt-get install podman runc; see docs/TESTING.md)" >&2
		return 1
	fi
}

podman_answers() {
	curl -fsS --max-time 5 --unix-socket "$PODMAN_SOCKET" http://d/_ping >/dev/null 2>&1
}

service() {
	local engine
	engine=$(name)
	if [ "$engine" = docker ]; then
		docker info >/dev/null || { echo "engine.sh: the Docker daemon does not answer" >&2; return 1; }
		return 0
	fi
	podman_answers && return 0
	mkdir -p "$(dirname "$PODMAN_SOCKET")"
	echo "starting podman's API service on unix://$PODMAN_SOCKET"
	# Detached from make's process group; it serves until stopped (--time=0).
	# Started in /: a service whose working directory is deleted (a removed
	# checkout) answers pings but fails every container start with "write
	# child: broken pipe".
	(cd / && setsid podman system service --time=0 "unix://$PODMAN_SOCKET" >/dev/null 2>&1 </dev/null &)
	for _ in $(seq 1 100); do
		podman_answers && return 0
		sleep 0.1
	done
	echo "engine.sh: podman's API service did not answer on $PODMAN_SOCKET within 10 s" >&2
	return 1
}

docker_host() {
	if [ -n "${DOCKER_HOST:-}" ]; then
		echo "$DOCKER_HOST"
	elif [ "$(name)" = podman ]; then
		echo "unix://$PODMAN_SOCKET"
	fi
}

# One project name wherever the checkout is, so its network is known.
project=remotestorage

compose() {
	if [ "$(name)" = docker ]; then
		docker compose -p "$project" "$@"
	elif podman compose version >/dev/null 2>&1; then
		podman compose -p "$project" "$@"
	elif command -v podman-compose >/dev/null 2>&1; then
		podman-compose -p "$project" "$@"
	else
		echo "engine.sh: neither 'podman compose' nor podman-compose is available (apt-get install podman-compose)" >&2
		return 1
	fi
}

db_up() {
	local engine
	engine=$(name)
	if [ "$engine" = docker ]; then
		compose up -d --wait
		return
	fi
	# podman-compose has no --wait, and podman runs no healthchecks without
	# systemd: ask the server itself, over TCP as clients do.
	compose up -d
	for _ in $(seq 1 240); do
		if podman exec remotestorage-postgres pg_isready -q -h 127.0.0.1 -p 5432 -U rlmm -d rlmm 2>/dev/null; then
			return 0
		fi
		sleep 0.5
	done
	echo "engine.sh: the database did not accept connections within 2 minutes; its log:" >&2
	podman logs --tail 30 remotestorage-postgres >&2 || true
	return 1
}

cmd=${1:-}
shift || true
case "$cmd" in
	name) name ;;
	service) service ;;
	docker-host) docker_host ;;
	compose) compose "$@" ;;
	db-up) db_up ;;
	db-down)
		compose down -v
		# podman-compose 1.0.3 leaves the project's network behind.
		if [ "$(name)" = podman ] && podman network exists "${project}_default"; then
			podman network rm "${project}_default" >/dev/null
		fi
		;;
	*) echo "usage: engine.sh name|service|docker-host|compose ARGS|db-up|db-down" >&2; exit 2 ;;
esac
