#!/usr/bin/env bash
# The one install procedure, used by the Makefile, the Dockerfile and the README.
#   scripts/install.sh VENV_DIR [dev]
# torch comes first and pinned, so nothing pulls a multi-GB CUDA build; set
# PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu where the CPU wheel is not on disk.
set -euo pipefail
venv=${1:-.venv}
extra=${2:-}
python_bin=${PYTHON:-python3}
[ -x "$venv/bin/python" ] || "$python_bin" -m venv "$venv"
pip="$venv/bin/python -m pip"
$pip install --quiet --upgrade pip
$pip install --quiet torch==2.13.0
# llama-cpp-python builds from source; the multimodal part is not needed.
export CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF}"
if [ "$extra" = "dev" ]; then
  $pip install --quiet -r requirements-dev.txt
else
  $pip install --quiet -r requirements.txt
fi
