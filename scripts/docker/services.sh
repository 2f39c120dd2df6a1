#!/usr/bin/env bash
# `make services`: PostgreSQL and Redis for the test suite, in Docker, on 127.0.0.1:5432 and
# 127.0.0.1:6379 (docker/test-services/compose.yml). Needs a running Docker engine with Compose v2.
# The images are Debian's postgresql and redis-server (docker/standins) on a base image chosen
# here: BASE_IMAGE when set; else rag-base:bookworm when this machine has one (made by
# `make docker-check`); else the Dockerfile's pinned python:3.11-slim when an image hub answers;
# else one is built with debootstrap (scripts/docker/base-image.sh, as root).
# Stop them with: docker compose -f docker/test-services/compose.yml down
set -euo pipefail
cd "$(dirname "$0")/../.."
compose_file=docker/test-services/compose.yml
log() { echo "[services] $*" >&2; }

without_docker() {
  log "$1"
  log "without Docker, install them from Debian (as root) and let the tests in as root:"
  log "  apt-get install -y postgresql redis-server && service postgresql start && service redis-server start"
  log "  su postgres -c \"createuser --superuser root\" && createdb test   # and trust on 127.0.0.1 in pg_hba.conf"
  exit 1
}
command -v docker >/dev/null 2>&1 || without_docker "no docker command on PATH"
docker info >/dev/null 2>&1 || without_docker "no Docker engine answers (start dockerd, or see scripts/docker/engine.sh)"
docker compose version >/dev/null 2>&1 || without_docker "docker has no Compose v2 (\`docker compose\`)"

if [ -z "${BASE_IMAGE:-}" ]; then
  pinned=$(sed -n 's/^ARG BASE_IMAGE=//p' Dockerfile)
  if docker image inspect rag-base:bookworm >/dev/null 2>&1; then
    BASE_IMAGE=rag-base:bookworm
  elif docker image inspect "$pinned" >/dev/null 2>&1 || timeout 60 docker pull -q "$pinned" >/dev/null 2>&1; then
    BASE_IMAGE=$pinned
  else
    log "$pinned cannot be pulled: building rag-base:bookworm from Debian with debootstrap"
    scripts/docker/base-image.sh rag-base:bookworm
    BASE_IMAGE=rag-base:bookworm
  fi
fi
export BASE_IMAGE
log "base image: $BASE_IMAGE"
docker compose -f "$compose_file" up -d --build --wait
log "PostgreSQL on 127.0.0.1:${TEST_POSTGRES_PORT:-5432} (user root, database test), Redis on 127.0.0.1:${TEST_REDIS_PORT:-6379}"
