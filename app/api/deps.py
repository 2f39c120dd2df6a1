"""Every dependency alias of the API in one place, so route signatures read like functions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from app.api.errors import ApiError
from app.config import Settings
from app.container import Container
from app.errors import AuthenticationFailed
from app.job_runners.evaluation import EvaluationRunner
from app.jobs.queue import JobQueue
from app.jobs.store import JobStore
from app.request_limits import DEFAULT_PAGE_SIZE, PAGE_SIZE_CEILING, RequestLimits
from app.retrieval.hybrid import HybridRetriever
from app.retrieval.scope import SearchScope
from app.security import TokenCodec
from app.services.answer import AnswerDeps
from app.services.api_keys import ApiKeyService
from app.services.audit import AuditLog
from app.services.auth import Authenticator, Identity
from app.services.blocks.answer_lane import AnswerLane
from app.services.blocks.page_lane import PageLane
from app.services.collection_access import CollectionAccess
from app.services.collections import CollectionService
from app.services.conversations import ConversationDeps, FollowUpDeps
from app.services.evaluation_access import QualityViewer
from app.services.evaluation_runs import RunDeps
from app.services.evaluation_sets import SetDeps
from app.services.feedback import FeedbackDeps
from app.services.indexing import DocumentDeps
from app.services.login import LoginGuard
from app.services.pages import PageDeps
from app.services.search_scope import SearchScopes, request_scope
from app.services.sso.signin import SingleSignOn
from app.services.stats import StatsDeps
from app.services.uploads import UploadDeps
from app.services.users import UserService
from app.services.webhooks import WebhookDeps
from app.storage.answer_records import AnswerRecordStore
from app.storage.collections import AccessStore
from app.storage.conversations import ConversationStore
from app.storage.rate_limit import RateLimiter, query_rate_key, retry_after_header

_bearer = HTTPBearer(
    auto_error=False,
    description="an access token from POST /auth/token, or an API key (`rag_...`) from "
    "POST /auth/keys",
)
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


async def get_container(request: Request) -> Container:
    """The process's components, created by the app's lifespan (read on the event loop, as
    the providers below are)."""
    container: Container = request.app.state.container
    return container


ContainerDep = Annotated[Container, Depends(get_container)]


# --- the collaborators a route uses, each taken from the process's container. Typed: mypy
# holds each provider to its return type, tests/test_dependency_types.py each alias to it.
# `async def`: they only read an attribute, and FastAPI runs a plain `def` dependency in the
# thread pool, a hop per provider per request that waits for a thread and the GIL under load ---


async def _settings(container: ContainerDep) -> Settings:
    return container.settings


async def _request_limits(container: ContainerDep) -> RequestLimits:
    return container.request_limits


async def _upload_deps(container: ContainerDep) -> UploadDeps:
    return container.upload_deps


async def _document_deps(container: ContainerDep) -> DocumentDeps:
    return container.document_deps


async def _answer_deps(container: ContainerDep) -> AnswerDeps:
    return container.answer_deps


async def _answer_lane(container: ContainerDep) -> AnswerLane:
    return container.answer_lane


async def _retriever(container: ContainerDep) -> HybridRetriever:
    return container.retriever


async def _conversations(container: ContainerDep) -> ConversationStore:
    return container.conversations


async def _conversation_deps(container: ContainerDep) -> ConversationDeps:
    return container.conversation_deps


async def _follow_up_deps(container: ContainerDep) -> FollowUpDeps:
    return container.follow_up_deps


async def _page_deps(container: ContainerDep) -> PageDeps:
    return container.page_deps


async def _page_lane(container: ContainerDep) -> PageLane:
    return container.page_lane


async def _stats_deps(container: ContainerDep) -> StatsDeps:
    return container.stats_deps


async def _users(container: ContainerDep) -> UserService:
    return container.users


async def _api_keys(container: ContainerDep) -> ApiKeyService:
    return container.api_keys


async def _audit_log(container: ContainerDep) -> AuditLog:
    return container.audit_log


async def _webhook_deps(container: ContainerDep) -> WebhookDeps:
    return container.webhook_deps


async def _authenticator(container: ContainerDep) -> Authenticator:
    return container.authenticator


async def _login_guard(container: ContainerDep) -> LoginGuard:
    return container.login_guard


async def _token_codec(container: ContainerDep) -> TokenCodec:
    return container.token_codec


async def _single_sign_on(container: ContainerDep) -> SingleSignOn:
    return container.single_sign_on


async def _readiness_checks(container: ContainerDep) -> dict[str, Callable[[], bool]]:
    return container.readiness_checks


async def _ocr_problem(container: ContainerDep) -> str | None:
    return container.ocr_problem


async def _feedback_deps(container: ContainerDep) -> FeedbackDeps:
    return container.feedback_deps


async def _evaluation_set_deps(container: ContainerDep) -> SetDeps:
    return container.evaluation_set_deps


async def _evaluation_run_deps(container: ContainerDep) -> RunDeps:
    return container.evaluation_run_deps


async def _evaluation_runner(container: ContainerDep) -> EvaluationRunner:
    return container.evaluation_runner


async def _search_scopes(container: ContainerDep) -> SearchScopes:
    return container.search_scopes


async def _collections(container: ContainerDep) -> CollectionService:
    return container.collections


async def _access_store(container: ContainerDep) -> AccessStore:
    return container.access_store


async def _rate_limiter(container: ContainerDep) -> RateLimiter:
    return container.rate_limiter


async def _jobs(container: ContainerDep) -> JobStore:
    return container.jobs


async def _job_queue(container: ContainerDep) -> JobQueue:
    return container.job_queue


def _answer_records(container: ContainerDep) -> AnswerRecordStore:
    """The answer record, read after dropping what is past its days (at most hourly, as on a
    write and at start-up): a process whose tenants ask nothing new still forgets old answers."""
    container.answer_log.prune_now_and_then()
    return container.answer_log.store


SettingsDep = Annotated[Settings, Depends(_settings)]
Limits = Annotated[RequestLimits, Depends(_request_limits)]
Uploads = Annotated[UploadDeps, Depends(_upload_deps)]
Documents = Annotated[DocumentDeps, Depends(_document_deps)]
Answers = Annotated[AnswerDeps, Depends(_answer_deps)]
AnswerLaneDep = Annotated[AnswerLane, Depends(_answer_lane)]
Retriever = Annotated[HybridRetriever, Depends(_retriever)]
Conversations = Annotated[ConversationStore, Depends(_conversations)]
ConversationTurns = Annotated[ConversationDeps, Depends(_conversation_deps)]
FollowUps = Annotated[FollowUpDeps, Depends(_follow_up_deps)]
Pages = Annotated[PageDeps, Depends(_page_deps)]
PageLaneDep = Annotated[PageLane, Depends(_page_lane)]
Stats = Annotated[StatsDeps, Depends(_stats_deps)]
Users = Annotated[UserService, Depends(_users)]
ApiKeys = Annotated[ApiKeyService, Depends(_api_keys)]
Audit = Annotated[AuditLog, Depends(_audit_log)]
Webhooks = Annotated[WebhookDeps, Depends(_webhook_deps)]
AuthenticatorDep = Annotated[Authenticator, Depends(_authenticator)]
LoginGuardDep = Annotated[LoginGuard, Depends(_login_guard)]
TokenCodecDep = Annotated[TokenCodec, Depends(_token_codec)]
SingleSignOnDep = Annotated[SingleSignOn, Depends(_single_sign_on)]
ReadinessChecks = Annotated[dict[str, Callable[[], bool]], Depends(_readiness_checks)]
OcrProblem = Annotated[str | None, Depends(_ocr_problem)]
Feedback = Annotated[FeedbackDeps, Depends(_feedback_deps)]
AnswerRecords = Annotated[AnswerRecordStore, Depends(_answer_records)]
EvaluationSets = Annotated[SetDeps, Depends(_evaluation_set_deps)]
EvaluationRunning = Annotated[RunDeps, Depends(_evaluation_run_deps)]
EvaluationRunnerDep = Annotated[EvaluationRunner, Depends(_evaluation_runner)]


def get_principal(
    authenticator: AuthenticatorDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Identity:
    """The verified identity of the caller; 401 for a missing, invalid, expired or revoked
    token or key, or a disabled or deleted user."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise ApiError(401, "unauthorized", "missing bearer token", _CHALLENGE)
    try:
        return authenticator.authenticate(credentials.credentials)
    except AuthenticationFailed as exc:
        raise ApiError(401, "unauthorized", exc.message, _CHALLENGE) from None


Principal = Annotated[Identity, Depends(get_principal)]


def caller_access(container: Container, caller: Identity) -> CollectionAccess:
    """Which collections the caller may read, write and manage now (resolved per request; an
    API key with its owner's current grants, within the collections it was limited to)."""
    return container.collection_access.resolve(
        tenant_id=caller.tenant_id,
        user_id=caller.user_id,
        role=caller.role,
        key_collections=caller.collections,
        version=caller.access_version,
    )


async def get_caller_access(container: ContainerDep, principal: Principal) -> CollectionAccess:
    """`caller_access` as a dependency: on the event loop when the answer is already held for
    the access version the credential read (no database read), else in a worker thread."""
    version = principal.access_version
    if version is not None:
        held = container.collection_access.resolve_held(
            tenant_id=principal.tenant_id,
            user_id=principal.user_id,
            role=principal.role,
            key_collections=principal.collections,
            version=version,
        )
        if held is not None:
            return held
    return await run_in_threadpool(caller_access, container, principal)


CallerAccess = Annotated[CollectionAccess, Depends(get_caller_access)]


SearchScopesDep = Annotated[SearchScopes, Depends(_search_scopes)]
CollectionServiceDep = Annotated[CollectionService, Depends(_collections)]
AccessStoreDep = Annotated[AccessStore, Depends(_access_store)]
RateLimiterDep = Annotated[RateLimiter, Depends(_rate_limiter)]
JobStoreDep = Annotated[JobStore, Depends(_jobs)]
JobQueueDep = Annotated[JobQueue, Depends(_job_queue)]


def readable_documents(container: Container, caller: Identity) -> Callable[[str], bool]:
    """Whether the caller reads a document now (history and citations are re-checked)."""
    return container.search_scopes.readable_documents(caller_access(container, caller))


def quality_viewer(container: Container, caller: Identity) -> QualityViewer:
    """The caller's view of the tenant's evaluation sets and runs (blocking: a few reads)."""
    access = caller_access(container, caller)
    return QualityViewer.of(
        access, container.search_scopes, role=caller.role, user_id=caller.user_id
    )


def scope_of(
    container: Container,
    caller: Identity,
    collections: Sequence[str] | None = None,
    filters: Any = None,
) -> SearchScope:
    """The search scope of a request: what the caller reads now, narrowed by the body's
    `collections` and `filters` (blocking: a few database reads)."""
    access = caller_access(container, caller)
    return request_scope(container.search_scopes, access, collections, filters)


ScopeResolver = Callable[[Sequence[str] | None, Any], SearchScope]


def get_scope_of(container: ContainerDep, principal: Principal) -> ScopeResolver:
    """`scope_of` bound to the caller: called with the body's `collections` and `filters`
    (blocking: a few database reads, so routes run it in the threadpool)."""

    def resolve(collections: Sequence[str] | None, filters: Any) -> SearchScope:
        return scope_of(container, principal, collections, filters)

    return resolve


ScopeOf = Annotated[ScopeResolver, Depends(get_scope_of)]


def get_readable_documents(container: ContainerDep, principal: Principal) -> Callable[[str], bool]:
    """`readable_documents` as a dependency."""
    return readable_documents(container, principal)


ReadableDocuments = Annotated[Callable[[str], bool], Depends(get_readable_documents)]


def get_quality_viewer(container: ContainerDep, principal: Principal) -> QualityViewer:
    """`quality_viewer` as a dependency."""
    return quality_viewer(container, principal)


QualityViewerDep = Annotated[QualityViewer, Depends(get_quality_viewer)]


async def client_ip(request: Request) -> str:
    """The client's address as the trusted-proxy logic resolved it (app/api/forwarded.py)."""
    return request.client.host if request.client else "unknown"


ClientIp = Annotated[str, Depends(client_ip)]

FORM_URLENCODED = "application/x-www-form-urlencoded"


async def require_form_urlencoded(request: Request) -> None:
    """415 for a body declared as anything but a urlencoded form (a login never needs JSON or
    multipart's file parts); with no Content-Type at all, validation names the missing fields."""
    declared = request.headers.get("content-type")
    if declared is not None and declared.split(";")[0].strip().lower() != FORM_URLENCODED:
        raise ApiError(415, "unsupported_media_type", f"send the credentials as {FORM_URLENCODED}")


def _limit(
    container: Container, key: str, per_minute: int, message: str = "too many requests; slow down"
) -> None:
    decision = container.rate_limiter.hit(key, per_minute)
    if not decision.allowed:
        raise ApiError(429, "rate_limited", message, {"Retry-After": retry_after_header(decision)})


def limit_queries(container: ContainerDep, principal: Principal) -> None:
    """429 when the caller exceeds the per-user query/search rate."""
    per_minute = container.settings.rate_limit_query_per_minute
    _limit(container, query_rate_key(principal.user_id), per_minute)


def limit_pages(container: ContainerDep, principal: Principal) -> None:
    """429 when the caller exceeds the per-user rate of the cited-page routes."""
    per_minute = container.settings.rate_limit_pages_per_minute
    _limit(container, f"pages:{principal.user_id}", per_minute)


def limit_conversation_starts(container: ContainerDep, principal: Principal) -> None:
    """429 when the caller starts conversations faster than the per-user rate."""
    per_minute = container.settings.rate_limit_conversations_per_minute
    _limit(
        container,
        f"conversation:{principal.user_id}",
        per_minute,
        "too many conversations started; slow down",
    )


def limit_key_creation(container: ContainerDep, principal: Principal) -> None:
    """429 when the caller makes API keys faster than the per-user rate."""
    per_minute = container.settings.rate_limit_keys_per_minute
    _limit(container, f"keys:{principal.user_id}", per_minute, "too many API keys made; slow down")


QueryRateLimit = Depends(limit_queries)
PageRateLimit = Depends(limit_pages)
ConversationRateLimit = Depends(limit_conversation_starts)
KeyCreationRateLimit = Depends(limit_key_creation)


# A listing's page: `limit` (None = the configured default, capped) and `offset`.
PageLimit = Annotated[
    int | None,
    Query(
        ge=1,
        le=PAGE_SIZE_CEILING,
        description=f"page size; default {DEFAULT_PAGE_SIZE} or the cap",
    ),
]
PageOffset = Annotated[int, Query(ge=0, le=10_000_000)]


def page_size(limits: Limits, limit: PageLimit = None) -> int:
    """The listing's page size: the asked `limit`, or the configured default, within the cap."""
    return limits.page_size(limit)


PageSize = Annotated[int, Depends(page_size)]
