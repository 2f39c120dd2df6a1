#!/usr/bin/env bash
# Regenerate the hash locks from the pins people edit:
#   requirements.txt      -> requirements.lock      (the service: `make run`, the image)
#   requirements-dev.txt  -> requirements-dev.lock  (tests and tools, constrained by the first)
#   docker/chroma/requirements.lock (the Chroma server image: a part of the dev lock)
#   scripts/lock.sh            (after changing a pin in requirements*.txt; commit the locks)
# Every package, transitive ones included, is pinned with the sha256 of each file PyPI publishes
# for that version; scripts/install.sh installs the locks with `pip install --require-hashes`.
# The lock is resolved for the interpreter that runs this script: CPython 3.11 on Linux x86_64,
# the service's platform. torch is the CPU build (torch==...+cpu), found where pip finds it
# (a wheel folder in pip's find-links, or PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu).
# pip-tools runs from a throwaway venv of its own, never the project's.
set -euo pipefail
cd "$(dirname "$0")/.."
python_bin=${PYTHON:-python3}
tools=${LOCK_TOOLS_VENV:-/tmp/rag-lock-tools}
[ -x "$tools/bin/pip-compile" ] || {
  "$python_bin" -m venv "$tools"
  "$tools/bin/python" -m pip install --quiet pip-tools==7.6.2
}
"$tools/bin/python" - <<'EOF'
import platform, sys
assert sys.version_info[:2] == (3, 11) and platform.machine() == "x86_64", (
    "lock for CPython 3.11 on x86_64 only; run this with PYTHON=python3.11 on such a machine"
)
EOF
compile=("$tools/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --strip-extras
  --no-emit-index-url --no-emit-find-links --no-emit-trusted-host --annotation-style=split)
export CUSTOM_COMPILE_COMMAND="scripts/lock.sh"
"${compile[@]}" --output-file requirements.lock requirements.txt
# The dev lock repeats the service's pins exactly: a test runs what the image runs.
"${compile[@]}" --constraint requirements.lock --output-file requirements-dev.lock \
  requirements-dev.txt
# The Chroma server image (docker/chroma) runs the client's chromadb with the server's web stack:
# those entries of the dev lock, with everything they need.
{
  echo "# The Chroma server image's packages: entries of requirements-dev.lock, written by"
  echo "# scripts/lock.sh (scripts/lock_entries.py). Do not edit."
  "$tools/bin/python" scripts/lock_entries.py requirements-dev.lock \
    chromadb fastapi uvicorn opentelemetry-instrumentation-fastapi
} >docker/chroma/requirements.lock
echo "wrote requirements.lock, requirements-dev.lock and docker/chroma/requirements.lock" >&2
