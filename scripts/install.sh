#!/usr/bin/env bash
# The one install procedure, used by the Makefile, the Dockerfile, CI and the README.
#   scripts/install.sh VENV_DIR [dev]
# Installs requirements.lock (with dev: requirements-dev.lock) with `pip install --require-hashes`:
# every package, transitive ones too, at its pinned version and one of the sha256 hashes PyPI
# publishes for it (scripts/lock.sh regenerates the locks from requirements*.txt). LOCK=FILE
# installs another lock of the same form (the Dockerfile's llama.cpp layer passes a part).
# pip itself, then torch (the CPU build, torch==...+cpu: nothing can pull a multi-GB CUDA build)
# and llama-cpp-python come first, each with what it needs, then the rest. Set
# PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu where the CPU wheel is not on disk.
# Packages built from an sdist (llama-cpp-python, pinned by its sdist's hash) get their build
# tools (scikit-build-core, cmake, ...) from the index without hashes: pip does not check those.
set -euo pipefail
venv=${1:-.venv}
extra=${2:-}
python_bin=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
if [ "$extra" = "dev" ]; then lock=${LOCK:-requirements-dev.lock}; else lock=${LOCK:-requirements.lock}; fi
[ -f "$lock" ] || { echo "error: no $lock here (run from the project root)" >&2; exit 1; }
[ -x "$venv/bin/python" ] || "$python_bin" -m venv "$venv"
pip="$venv/bin/python -m pip"
parts=$(mktemp -d)
trap 'rm -rf "$parts"' EXIT

# part NAME [--alone | --dependencies-only]: NAME's entries of the lock (with its dependencies
# unless --alone, only those with --dependencies-only) in $parts/NAME.txt; false when the lock
# has no NAME.
part() {
  grep -qiE "^$1==" "$lock" || return 1
  "$venv/bin/python" "$here/lock_entries.py" "$lock" "$@" >"$parts/$1.txt" || exit 1
}

if part pip --alone; then
  $pip install --quiet --require-hashes --no-deps -r "$parts/pip.txt"
fi
if part torch; then
  $pip install --quiet --require-hashes -r "$parts/torch.txt"
fi
# llama-cpp-python builds from source for this CPU (-march=native); the multimodal part is not
# needed. Its AMX kernels are compiled out: on a CPU with AMX (Xeon Sapphire Rapids and later)
# they crashed the process (SIGSEGV in the first decode of the Q4_K_M model) while the AVX-512
# build without them answers normally. Built on its own and never from pip's wheel cache, whose
# key ignores CMAKE_ARGS: a wheel cached from an earlier build would come back unchanged. pip
# leaves an installed llama-cpp-python of the locked version as it is.
if [ -z "${CMAKE_ARGS:-}" ]; then
  no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  CMAKE_ARGS="-DLLAVA_BUILD=OFF '-DCMAKE_C_FLAGS=$no_amx' '-DCMAKE_CXX_FLAGS=$no_amx'"
fi
export CMAKE_ARGS
# What it needs first, then the build alone: in hash mode pip refuses the unpinned requirement
# lines an sdist's metadata brings (numpy>=1.20.0), even with numpy==... beside them.
if part llama-cpp-python --dependencies-only; then
  $pip install --quiet --require-hashes -r "$parts/llama-cpp-python.txt"
  part llama-cpp-python --alone
  $pip install --quiet --no-cache-dir --require-hashes --no-deps -r "$parts/llama-cpp-python.txt"
fi
# OCR of scanned PDFs and images is a runtime feature: Debian's Tesseract with its English and
# Arabic models. Without it the service runs and refuses scans with "install tesseract-ocr".
if ! command -v tesseract >/dev/null 2>&1 \
  || ! tesseract --list-langs 2>/dev/null | grep -qx ara \
  || ! tesseract --list-langs 2>/dev/null | grep -qx eng; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      tesseract-ocr tesseract-ocr-eng tesseract-ocr-ara >/dev/null
  else
    echo "note: OCR of scans needs: apt-get install tesseract-ocr tesseract-ocr-eng tesseract-ocr-ara" >&2
  fi
fi
$pip install --quiet --require-hashes -r "$lock"
if [ "$extra" = "dev" ]; then
  # The browser tests drive Debian's Chromium (Playwright cannot download its own offline) and
  # the gateway tests a real nginx; the contents-page case reads the R manuals (r-doc-pdf), and the
  # natural-question sets (eval/manual_questions.py) those, the gnuplot manual (gnuplot-doc) and
  # the wider development set's manuals (debian-reference-en ... fonts-hosny-amiri);
  # the monitoring tests start a real Prometheus and check the alert rules with its promtool; the
  # single sign-on tests start a real OpenID provider (Glewlwyd); the
  # OCR tests draw shaped Arabic scans with Pillow, which needs libraqm.
  # Installed here when missing and allowed (root with apt); otherwise those tests fail and say
  # how to install them, unless RAG_TEST_ALLOW_SKIP_SERVICES=1.
  wide_manuals_missing=0
  for manual in /usr/share/debian-reference/debian-reference.en.pdf \
    /usr/share/freedombox/manual/en/freedombox-manual.pdf \
    /usr/share/doc/libdbi-doc/programmers-guide.pdf.gz /usr/share/doc/xfig/xfig_ref_en.pdf \
    /usr/share/doc/mrbayes/Manual_MrBayes_v3.2.pdf \
    /usr/share/doc/gutenprint-doc/gutenprint-users-manual.pdf \
    /usr/share/doc/auto-multiple-choice/auto-multiple-choice.en.pdf \
    /usr/share/doc/debmake-doc/debmake-doc.en.pdf /usr/share/doc/nauty/nug28.pdf \
    /usr/share/doc/fonts-hosny-amiri/Documentation-Arabic.pdf.gz; do
    [ -f "$manual" ] || wide_manuals_missing=1
  done
  if ! command -v chromium >/dev/null 2>&1 || [ ! -x /usr/sbin/nginx ] \
    || [ ! -f /usr/share/R/doc/manual/R-intro.pdf ] || [ ! -f /usr/share/doc/gnuplot/gnuplot.pdf ] \
    || [ "$wide_manuals_missing" = 1 ] \
    || ! command -v prometheus >/dev/null 2>&1 || ! ldconfig -p | grep -q 'libraqm\.so\.0' \
    || [ ! -x /usr/bin/glewlwyd ]; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        chromium chromium-driver fonts-dejavu-core libraqm0 nginx-light r-doc-pdf gnuplot-doc \
        debian-reference-en freedombox-doc-en libdbi-doc xfig-doc mrbayes-doc gutenprint-doc \
        auto-multiple-choice-doc-pdf debmake-doc nauty-doc fonts-hosny-amiri \
        prometheus glewlwyd >/dev/null
    else
      echo "note: the browser, gateway, single sign-on and contents-case tests need: apt-get install chromium libraqm0 nginx-light r-doc-pdf gnuplot-doc prometheus glewlwyd" >&2
      echo "note: the wide manual set needs: apt-get install debian-reference-en freedombox-doc-en libdbi-doc xfig-doc mrbayes-doc gutenprint-doc auto-multiple-choice-doc-pdf debmake-doc nauty-doc fonts-hosny-amiri" >&2
    fi
  fi
fi
