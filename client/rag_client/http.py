"""The service's HTTP API: a key on every request, errors as ApiError, and 429/503 (and a
lost connection) retried after `Retry-After`, each wait and the number of tries capped."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import httpx

from rag_client.errors import ApiError, ConnectionFailed, UsageError

RETRIED_STATUSES = (429, 503)


def retry_after_seconds(response: httpx.Response, attempt: int) -> float:
    """How long the service asked us to wait (seconds, or an HTTP date), else a backoff."""
    raw = response.headers.get("retry-after", "")
    try:
        return max(float(raw), 0.0)
    except ValueError:
        pass
    if raw:
        from email.utils import parsedate_to_datetime

        try:
            return max(parsedate_to_datetime(raw).timestamp() - time.time(), 0.0)
        except (TypeError, ValueError):
            pass
    return float(min(2**attempt, 30))


def _error_of(response: httpx.Response) -> ApiError:
    try:
        body = response.json()
        error = body["error"]
        return ApiError(response.status_code, str(error["code"]), str(error["message"]))
    except (ValueError, KeyError, TypeError):
        text = response.text.strip()[:200] or response.reason_phrase
        return ApiError(response.status_code, f"http_{response.status_code}", text)


class Api:
    """One service, one key; thread-safe (uploads run in several threads)."""

    def __init__(
        self,
        url: str,
        api_key: str | None,
        *,
        timeout_s: float = 60.0,
        max_tries: int = 6,
        max_wait_s: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
    ) -> None:
        headers = {"User-Agent": "rag-client"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.url = url
        self._client = httpx.Client(
            base_url=url, headers=headers, timeout=timeout_s, follow_redirects=False
        )
        self._max_tries = max_tries
        self._max_wait_s = max_wait_s
        self._sleep = sleep
        self._log = log

    def close(self) -> None:
        """Close the connections."""
        self._client.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Callable[[], dict[str, Any]] | None = None,
        **kw: Any,
    ) -> httpx.Response:
        """Send a request; `body()` gives fresh content arguments for each try (files are read
        again). ApiError on an error status, once the retries are spent."""
        for attempt in range(1, self._max_tries + 1):
            extra = body() if body is not None else {}
            try:
                response = self._client.request(method, path, **kw, **extra)
            except httpx.TransportError as exc:
                if attempt == self._max_tries:
                    raise ConnectionFailed(self.url, str(exc) or type(exc).__name__) from None
                wait = min(float(2**attempt), self._max_wait_s)
                self._log(f"{method} {path}: {exc or type(exc).__name__}; retrying in {wait:.0f} s")
                self._sleep(wait)
                continue
            if response.status_code in RETRIED_STATUSES and attempt < self._max_tries:
                wait = min(retry_after_seconds(response, attempt), self._max_wait_s)
                self._log(f"{method} {path}: {response.status_code}; retrying in {wait:.1f} s")
                self._sleep(wait)
                continue
            if response.status_code >= 400:
                raise _error_of(response)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def get(self, path: str, **kw: Any) -> Any:
        """GET and decode JSON."""
        return self.request("GET", path, **kw).json()

    def post(self, path: str, **kw: Any) -> Any:
        """POST and decode JSON."""
        return self.request("POST", path, **kw).json()

    def stream_lines(self, method: str, path: str, **kw: Any) -> Any:
        """The response's lines as they arrive (server-sent events); no retries."""
        with self._client.stream(method, path, **kw) as response:
            if response.status_code >= 400:
                response.read()
                raise _error_of(response)
            yield from response.iter_lines()


def require_key(api_key: str | None) -> str:
    """The key, or UsageError saying how to get one."""
    if not api_key:
        raise UsageError("no API key: pass --api-key, set RAG_API_KEY, or run `rag login`")
    return api_key
