#!/usr/bin/env bash
# `make docker-check`: build the image and run the compose stack for real, then tear it down.
#   scripts/docker/check.sh            (as root on a Debian machine; opt-in, never part of CI)
# Steps: engine + Compose v2 (engine.sh); base image (python:3.11-slim if pullable, else
# debootstrap, base-image.sh); the project image; redis/postgres images (official if pullable,
# else Debian stand-ins tagged with the compose names); chroma and proxy images; `compose up`
# with fresh secrets; the user flow (flow.py); teardown. Prints how long each step took.
# Environment: CHECK_KEEP=1 leaves the stack running; CHECK_PROJECT names the compose project;
# CHECK_FRESH_BASE=1 rebuilds the debootstrap base image even if one exists.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
python=${PYTHON:-$repo/.venv/bin/python}
project=${CHECK_PROJECT:-ragcheck}
api_port=${CHECK_API_PORT:-18000}
proxy_port=${CHECK_PROXY_PORT:-18080}
prometheus_port=${CHECK_PROMETHEUS_PORT:-19090}
work=$(mktemp -d /tmp/docker-check.XXXXXX)
started=$(date +%s)
timings=()

log() { echo "[docker-check] $*" >&2; }
timed() {  # timed NAME COMMAND...: run it and record its wall time
  local name=$1 t0 rc=0
  shift
  t0=$(date +%s)
  log "== $name"
  "$@" || rc=$?
  timings+=("$(printf '%-28s %5d s' "$name" $(($(date +%s) - t0)))")
  return $rc
}
report() {
  echo
  echo "docker-check timings ($(date -u +%Y-%m-%d), $(nproc) cores):"
  printf '  %s\n' "${timings[@]}"
  printf '  %-28s %5d s\n' "total" $(($(date +%s) - started))
}

build_docker=$(scripts/docker/engine.sh | tail -1)
export DOCKER_BUILDKIT=1
build() { nice -n 10 "$build_docker" build "$@"; }

# Pass how pip reaches PyPI here (index, mirror, timeout) into every build.
pip_args=()
for var in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST PIP_DEFAULT_TIMEOUT; do
  [ -n "${!var:-}" ] && pip_args+=(--build-arg "$var=${!var}")
done

pullable() {  # an image hub answers for this image within a minute
  timeout 60 docker pull -q "$1" >/dev/null 2>&1
}

base_image() {
  if pullable python:3.11-slim; then
    base=python:3.11-slim
  elif docker image inspect rag-base:bookworm >/dev/null 2>&1 && [ "${CHECK_FRESH_BASE:-0}" != 1 ]; then
    # A new base image invalidates every cached layer above it; CHECK_FRESH_BASE=1 forces one.
    base=rag-base:bookworm
    log "python:3.11-slim cannot be pulled: reusing $base"
  else
    base=rag-base:bookworm
    log "python:3.11-slim cannot be pulled: building $base with debootstrap"
    scripts/docker/base-image.sh "$base"
  fi
}

torch_wheel() {
  # The CPU wheel pip finds on this machine (a local wheel folder or an index), into the context.
  if ! compgen -G "docker/wheels/torch-2.13.0+cpu-*.whl" >/dev/null; then
    "$python" -m pip download --quiet --no-deps --only-binary=:all: torch==2.13.0 \
      -d docker/wheels || true
    rm -f docker/wheels/torch-2.13.0-*.whl  # a non-CPU build: leave it to TORCH_INDEX_URL
  fi
  ls docker/wheels/ >&2
}

project_image() {
  build --progress=plain --build-arg BASE_IMAGE="$base" ${pip_args[@]+"${pip_args[@]}"} \
    -t rag-service:latest . 2>&1 | tee "$work/build.log" | grep -E '^#[0-9]+ (\[|DONE|CACHED)|reranker:|llm:|torch' >&2
  [ "${PIPESTATUS[0]}" -eq 0 ]
}

backend_images() {
  local official standin
  for pair in redis:7-alpine=redis postgres:16-alpine=postgres; do
    official=${pair%%=*}
    standin=${pair##*=}
    if pullable "$official"; then
      log "$official pulled"
    else
      log "$official cannot be pulled: Debian stand-in tagged $official"
      build -q --build-arg BASE_IMAGE="$base" -t "$official" "docker/standins/$standin" >/dev/null
    fi
  done
  build -q --build-arg BASE_IMAGE="$base" ${pip_args[@]+"${pip_args[@]}"} -t rag-chroma:1.5.9 \
    docker/chroma >/dev/null
  build -q --build-arg BASE_IMAGE="$base" -t rag-proxy:latest docker/proxy >/dev/null
  build -q --build-arg BASE_IMAGE="$base" -t rag-prometheus:latest docker/prometheus >/dev/null
}

secret() { "$python" -c 'import secrets; print(secrets.token_hex(24))'; }
write_env() {
  cat >"$work/check.env" <<EOF
RAG_ENV_FILE=$work/check.env
RAG_JWT_SECRET=$(secret)
POSTGRES_PASSWORD=$(secret)
REDIS_PASSWORD=$(secret)
CHROMA_TOKEN=$(secret)
API_PORT=$api_port
PROXY_PORT=$proxy_port
PROMETHEUS_PORT=$prometheus_port
API_WORKERS=2
RAG_ROOT_PATH=/rag
RAG_TRUSTED_PROXIES=172.29.57.250
RAG_LOG_LEVEL=INFO
# The first answer loads the LLM; on a shared, busy machine 120 s (the default) was not enough.
RAG_LLM_TIMEOUT_S=600
EOF
}

compose=(docker compose -p "$project" --env-file "$work/check.env" -f "$repo/docker-compose.yml" --profile proxy --profile monitoring)
teardown() {
  local rc=$?
  if [ "${CHECK_KEEP:-0}" = 1 ]; then
    log "CHECK_KEEP=1: stack left running (${compose[*]} down -v to remove)"
  else
    "${compose[@]}" logs --no-color >"$work/compose.log" 2>&1 || true
    timed "teardown (down -v)" "${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
  fi
  report
  log "logs in $work"
  [ $rc -eq 0 ] && log "all checks passed" || log "FAILED (exit $rc)"
  exit $rc
}
trap teardown EXIT

timed "base image" base_image
timed "torch wheel" torch_wheel
timed "project image" project_image
timed "backend images" backend_images
write_env
timed "compose up (healthy)" "${compose[@]}" up -d --no-build --wait --wait-timeout 900
timed "user flow" "$python" scripts/docker/flow.py --compose "${compose[*]}" \
  --url "http://127.0.0.1:$api_port" --proxy "http://127.0.0.1:$proxy_port" --workdir "$work"
timed "prometheus scrape" "$python" scripts/docker/prometheus_check.py \
  --url "http://127.0.0.1:$prometheus_port"
