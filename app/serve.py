"""`python -m app.serve`: start the API on RAG_HOST:RAG_PORT (what `make run` calls)."""

from __future__ import annotations

import sys

import uvicorn

from app.config import get_settings
from app.errors import ConfigurationError


def main(application: str = "app.main:app", *, factory: bool = False) -> None:
    """Validate settings, tell the operator how to get a user, then serve `application` (an
    import path; with `factory`, of a function that returns the app)."""
    try:
        settings = get_settings()
    except ConfigurationError as exc:
        sys.exit(f"error: {exc}")
    print(
        "RAG service starting on "
        f"http://{settings.host}:{settings.port} (docs at /docs, data in {settings.data_dir}).\n"
        "Create a user with:\n"
        "  echo 'a-long-password' | .venv/bin/python -m app.cli create-user "
        "--tenant acme --username alice --password-stdin\n"
        "then: curl -d 'username=alice&password=a-long-password' "
        f"http://{settings.host}:{settings.port}/auth/token",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(
        application,
        factory=factory,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,  # the app logs every request as JSON with its request id
        # uvicorn would otherwise believe X-Forwarded-For from 127.0.0.1; the app decides
        # from RAG_TRUSTED_PROXIES instead (app/api/forwarded.py).
        proxy_headers=False,
    )


if __name__ == "__main__":
    main()
