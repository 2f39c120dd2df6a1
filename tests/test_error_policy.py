"""Which error texts may reach a client: client errors' own messages, generic ones otherwise."""

from __future__ import annotations

import pytest

from app.errors import (
    CorruptDocument,
    GenerationTimeout,
    InvalidInput,
    ProviderUnavailable,
    RagError,
    public_job_error,
    public_message,
)

pytestmark = pytest.mark.unit

LEAKY = "redis at 10.0.0.7:6379 unreachable: Error 111 connecting; body {'trace': '/srv/x.py'}"


def test_client_errors_keep_their_message() -> None:
    assert public_message(InvalidInput("limit must not exceed 100")) == "limit must not exceed 100"


@pytest.mark.parametrize("error", [ProviderUnavailable(LEAKY), GenerationTimeout(LEAKY)])
def test_server_errors_get_a_generic_message(error: RagError) -> None:
    message = public_message(error)
    assert message and "10.0.0.7" not in message and "/srv" not in message


def test_a_server_error_written_for_clients_may_opt_in() -> None:
    class Busy(RagError):
        code = "busy"
        http_status = 503
        expose_message = True

    assert public_message(Busy("all answer slots are taken; retry in 3 s")).startswith("all")


@pytest.mark.parametrize(
    ("code", "shown"),
    [
        (CorruptDocument.code, "the PDF is damaged; export it again"),
        ("processing_interrupted", "the PDF is damaged; export it again"),
        ("ingestion_failed", "the PDF is damaged; export it again"),
        ("provider_unavailable", None),
        ("retrying", None),
        ("internal_error", None),
        ("no_such_code", None),
    ],
)
def test_job_errors_show_the_detail_only_for_client_side_codes(
    code: str, shown: str | None
) -> None:
    detail = "the PDF is damaged; export it again" if shown else LEAKY
    message = public_job_error(code, detail)
    if shown:
        assert message == shown
    else:
        assert message and "10.0.0.7" not in message and "Error 111" not in message


def _error_classes(base: type[RagError]) -> list[type[RagError]]:
    return [cls for sub in base.__subclasses__() for cls in (sub, *_error_classes(sub))]


def test_every_error_the_service_defines_is_shown_as_its_class_allows() -> None:
    import app.main  # noqa: F401  (every module, so every error class the service can store)

    detail = "the PDF is damaged; export it again"
    classes = [c for c in _error_classes(RagError) if c.__module__.startswith("app.")]
    assert len(classes) > 20
    for cls in classes:
        client_side = cls.http_status < 500 or cls.expose_message
        shown = public_job_error(cls.code, detail)
        assert (shown == detail) == client_side, (cls.__name__, shown)
