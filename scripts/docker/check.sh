#!/usr/bin/env bash
# `make docker-check`: build the image and run the compose stack for real, then tear it down.
#   scripts/docker/check.sh            (as root on a Debian machine; opt-in, never part of CI)
# Steps: engine + Compose v2 (engine.sh); base image (the Dockerfile's digest-pinned
# python:3.11-slim if pullable, else debootstrap, base-image.sh); the project image; redis/postgres
# images (compose's digest-pinned official ones if pullable, else Debian stand-ins); chroma and
# proxy images; `compose up` with fresh secrets; the user flow (flow.py); teardown. Prints how
# long each step took.
# Pinning: an upstream image is used only by its `name:tag@sha256:` reference (the daemon checks
# the digest when it pulls). A stand-in built here has no registry digest, so it is tagged with
# its own image id (`rag-base:sha256-<id>`), checked to still be that id before each use, every
# image built on it is checked to start with its layers, and each running container's image is
# checked against the id it was given.
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

# The pinned upstream references, read where they are declared (one place each).
pinned_base=$(sed -n 's/^ARG BASE_IMAGE=//p' Dockerfile)
pinned_compose() {  # pinned_compose VAR: the default of ${VAR:-...} in docker-compose.yml
  sed -n "s/.*\${$1:-\([^}]*\)}.*/\1/p" docker-compose.yml | head -1
}
case "$pinned_base" in *@sha256:*) ;; *) log "Dockerfile's BASE_IMAGE is not pinned by digest"; exit 1 ;; esac

image_id() { docker image inspect -f '{{.Id}}' "$1"; }
by_id() {  # by_id NAME TAG: tag local image TAG as NAME:sha256-<its id>; prints that reference
  local id
  id=$(image_id "$2")
  docker tag "$2" "$1:${id/:/-}"
  echo "$1:${id/:/-}"
}
still_is() {  # still_is REF: a by_id reference still names the image whose id it carries
  local want=${1##*:}
  [ "$(image_id "$1")" = "${want/-/:}" ] || { log "$1 no longer is the image it names"; return 1; }
}
still_is_pinned() {  # an upstream digest reference, or a stand-in that is still its id
  case "$1" in *@sha256:*) ;; *) still_is "$1" ;; esac
}
built_on() {  # built_on BASE IMAGE: IMAGE's layers start with BASE's (it was built on it)
  local base_layers image_layers
  base_layers=$(docker image inspect -f '{{join .RootFS.Layers " "}}' "$1")
  image_layers=$(docker image inspect -f '{{join .RootFS.Layers " "}}' "$2")
  case "$image_layers" in "$base_layers"*) ;; *) log "$2 is not built on $1"; return 1 ;; esac
}

base_image() {
  if pullable "$pinned_base"; then
    base=$pinned_base
  elif docker image inspect rag-base:bookworm >/dev/null 2>&1 && [ "${CHECK_FRESH_BASE:-0}" != 1 ]; then
    # A new base image invalidates every cached layer above it; CHECK_FRESH_BASE=1 forces one.
    base=$(by_id rag-base rag-base:bookworm)
    log "$pinned_base cannot be pulled: reusing $base"
  else
    log "$pinned_base cannot be pulled: building rag-base:bookworm with debootstrap"
    scripts/docker/base-image.sh rag-base:bookworm
    base=$(by_id rag-base rag-base:bookworm)
    log "base image: $base"
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

# Steps run under `timed` (`"$@" || rc=$?`), where `set -e` is off: each command returns its failure.
project_image() {
  still_is_pinned "$base" || return 1
  build --progress=plain --build-arg BASE_IMAGE="$base" ${pip_args[@]+"${pip_args[@]}"} \
    -t rag-service:latest . 2>&1 | tee "$work/build.log" | grep -E '^#[0-9]+ (\[|DONE|CACHED)|reranker:|llm:|torch' >&2
  [ "${PIPESTATUS[0]}" -eq 0 ] && built_on "$base" rag-service:latest
}

# REDIS_IMAGE / POSTGRES_IMAGE for compose, when a stand-in replaces the pinned official image.
backend_refs=()
backend_images() {
  local var official standin ref image
  for pair in REDIS_IMAGE=redis POSTGRES_IMAGE=postgres; do
    var=${pair%%=*}
    standin=${pair##*=}
    official=$(pinned_compose "$var")
    case "$official" in *@sha256:*) ;; *) log "$var is not pinned by digest in compose"; return 1 ;; esac
    if pullable "$official"; then
      log "$official pulled"
    else
      still_is_pinned "$base" || return 1
      build -q --build-arg BASE_IMAGE="$base" -t "rag-standin-$standin:build" \
        "docker/standins/$standin" >/dev/null || return 1
      built_on "$base" "rag-standin-$standin:build" || return 1
      ref=$(by_id "rag-standin-$standin" "rag-standin-$standin:build") || return 1
      backend_refs+=("$var=$ref")
      log "$official cannot be pulled: Debian stand-in $ref"
    fi
  done
  still_is_pinned "$base" || return 1
  build -q --build-arg BASE_IMAGE="$base" ${pip_args[@]+"${pip_args[@]}"} -t rag-chroma:1.5.9 \
    docker/chroma >/dev/null || return 1
  build -q --build-arg BASE_IMAGE="$base" -t rag-proxy:latest docker/proxy >/dev/null || return 1
  build -q --build-arg BASE_IMAGE="$base" -t rag-prometheus:latest docker/prometheus >/dev/null \
    || return 1
  for image in rag-chroma:1.5.9 rag-proxy:latest rag-prometheus:latest; do
    built_on "$base" "$image" || return 1
  done
}

# Every running container's image is the one it was given: a stand-in by its id, an upstream
# image by its pinned digest, the images built here by theirs.
running_images() {
  local service container want got var ref
  for service in api worker chroma redis postgres proxy prometheus; do
    container=$("${compose[@]}" ps -q "$service" | head -1)
    [ -n "$container" ] || { log "$service is not running"; return 1; }
    got=$(docker inspect -f '{{.Image}}' "$container")
    case "$service" in
      api | worker) want=$(image_id rag-service:latest) ;;
      chroma) want=$(image_id rag-chroma:1.5.9) ;;
      proxy) want=$(image_id rag-proxy:latest) ;;
      prometheus) want=$(image_id rag-prometheus:latest) ;;
      *)
        var=$(echo "$service" | tr '[:lower:]' '[:upper:]')_IMAGE
        ref=$(printf '%s\n' ${backend_refs[@]+"${backend_refs[@]}"} | sed -n "s/^$var=//p")
        if [ -n "$ref" ]; then
          want=${ref##*:}
          want=${want/-/:}
        else
          want=$(image_id "$(pinned_compose "$var")")
        fi
        ;;
    esac
    [ "$got" = "$want" ] || { log "$service runs $got, not $want"; return 1; }
    log "$service runs ${got:0:19}"
  done
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
  printf '%s\n' ${backend_refs[@]+"${backend_refs[@]}"} >>"$work/check.env"
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
timed "pinned images running" running_images
timed "user flow" "$python" scripts/docker/flow.py --compose "${compose[*]}" \
  --url "http://127.0.0.1:$api_port" --proxy "http://127.0.0.1:$proxy_port" --workdir "$work"
timed "prometheus scrape" "$python" scripts/docker/prometheus_check.py \
  --url "http://127.0.0.1:$prometheus_port"
