"""The composition root: builds each component once per process, lazily, from Settings.

Routes, the CLI, workers and tests all get their components here, so a test can hand in its
fake embedder or LLM (`ProviderOverrides`) and nothing heavy loads at import time. Only the
entry points (app/api, app/main.py, app/cli.py, app/worker.py) import this module: services and
jobs receive the collaborators they need (`AnswerDeps`, `DocumentDeps`, `IngestDeps`...), never
the container.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property, partial
from typing import TYPE_CHECKING

from app import tracing
from app.config import Settings
from app.domain import QueueBacklog
from app.request_limits import RequestLimits
from app.services.blocks.pipeline import PipelineConfig

if TYPE_CHECKING:
    from app.job_runners.evaluation import EvaluationRunner
    from app.job_runners.runner import IngestDeps
    from app.jobs.ending_bell import RedisEndingBell
    from app.jobs.evaluation_runs import EvaluationRunStore
    from app.jobs.queue import JobQueue
    from app.jobs.store import JobRecord, JobStore, StorageQuota
    from app.jobs.trace_carriers import TraceCarriers
    from app.memory import MemoryBudget
    from app.providers.types import LLM, Embedder, ProviderOverrides, Reranker
    from app.rendering.cache import PageImageCache
    from app.rendering.pdf_page import RenderLimits
    from app.retrieval.hybrid import HybridRetriever
    from app.retrieval.scope import SearchScope
    from app.security import ApiKeyHasher, TokenCodec
    from app.services.answer import AnswerDeps
    from app.services.api_keys import ApiKeyService
    from app.services.audit import AuditLog
    from app.services.auth import Authenticator
    from app.services.blocks.answer_lane import AnswerLane
    from app.services.blocks.answer_log import AnswerLog
    from app.services.blocks.corpus import Corpus
    from app.services.blocks.page_lane import PageLane
    from app.services.blocks.second_arm import SecondArm
    from app.services.blocks.webhook_delivery import WebhookDispatcher
    from app.services.blocks.webhook_urls import UrlRules
    from app.services.collection_access import AccessResolver
    from app.services.collections import CollectionService
    from app.services.conversations import ConversationDeps, FollowUpDeps
    from app.services.evaluation_runs import RunDeps
    from app.services.evaluation_sets import SetDeps
    from app.services.feedback import FeedbackDeps
    from app.services.indexing import DocumentDeps
    from app.services.login import LoginGuard
    from app.services.pages import KeptOriginals, PageDeps
    from app.services.search_scope import SearchScopes
    from app.services.sso.signin import SingleSignOn
    from app.services.stats import StatsDeps
    from app.services.uploads import UploadDeps
    from app.services.users import UserService
    from app.services.webhooks import DocumentEvents, WebhookDeps
    from app.storage.api_keys import ApiKeyStore
    from app.storage.cache import AnswerCache
    from app.storage.chunks import ChunkStore
    from app.storage.collections import AccessStore
    from app.storage.conversations import ConversationQuota, ConversationStore
    from app.storage.db import Database
    from app.storage.documents import DocumentStore
    from app.storage.rate_limit import RateLimiter
    from app.storage.revoked_tokens import RevokedTokens
    from app.storage.users import UserStore
    from app.storage.vector_index import VectorIndex
    from app.storage.webhooks import WebhookStore


class Container:
    """Lazily built, process-wide components for one Settings object.

    `providers` replaces the embedder or the LLM the settings name (tests' fakes, a benchmark's
    wrapped model); a deployment passes none.
    """

    def __init__(self, settings: Settings, providers: ProviderOverrides | None = None) -> None:
        self.settings = settings
        self._providers = providers

    @cached_property
    def embedder(self) -> Embedder:
        if self._providers is not None and self._providers.embedder is not None:
            return self._providers.embedder
        from app.providers.embeddings import build_embedder

        return build_embedder(self.settings)

    @cached_property
    def vector_index(self) -> VectorIndex:
        from app.storage.chroma_index import build_vector_index
        from app.storage.directory_lock import lock_directory

        if self.settings.vector_backend == "chroma":
            lock_directory(self.settings.data_dir / "chroma")
        return build_vector_index(
            self.settings,
            self.embedder.model_id,
            self.embedder.dimension,
            after_eviction=self.memory_budget.after_eviction,
        )

    @cached_property
    def memory_budget(self) -> MemoryBudget:
        """Returns freed heap to the OS after hot tenants are evicted (RAG_MEMORY_BUDGET_MB)."""
        from app.memory import MemoryBudget

        return MemoryBudget(self.settings.memory_budget_mb)

    @cached_property
    def corpus(self) -> Corpus:
        """The tenants' chunks: rows and vectors, written and read together."""
        from app.services.blocks.corpus import Corpus

        return Corpus(
            self.chunk_records,
            self.vector_index,
            self.embedder,
            second=self.second_arm,
            english=self.english_arm,
        )

    @cached_property
    def access_store(self) -> AccessStore:
        """Collections, groups, grants and the tenants' access versions."""
        from app.storage.collections import AccessStore

        return AccessStore(self.database)

    @cached_property
    def collection_access(self) -> AccessResolver:
        """Resolves a caller's readable and writable collections once per request."""
        from app.services.collection_access import AccessResolver

        return AccessResolver(self.access_store, hot_tenants=self.settings.hot_tenants)

    @cached_property
    def search_scopes(self) -> SearchScopes:
        """A request's collections and filters as the documents retrieval may see."""
        from app.services.search_scope import SearchScopes

        return SearchScopes(
            self.access_store,
            self.chunk_records.version,
            lambda tenant_id: self.retriever.scoped.owners(tenant_id),
            hot_tenants=self.settings.hot_tenants,
        )

    @cached_property
    def collections(self) -> CollectionService:
        """Collections, groups and grants as the API manages them."""
        from app.services.collections import CollectionService

        def changed(tenant_id: str) -> None:  # a move or new metadata: scopes and answers
            self.chunk_records.bump_version(tenant_id)

        return CollectionService(
            self.access_store, self.collection_access, changed, self.document_events
        )

    @cached_property
    def second_arm(self) -> SecondArm | None:
        """The second dense arm (RAG_SECOND_EMBEDDING), its model loaded; None when off."""
        from app.services.blocks.corpus import build_second_arm

        return build_second_arm(self.settings, after_eviction=self.memory_budget.after_eviction)

    @cached_property
    def english_arm(self) -> SecondArm | None:
        """The English arm (RAG_ENGLISH_EMBEDDING), its model loaded; None when off."""
        from app.services.blocks.corpus import build_english_arm

        return build_english_arm(self.settings, after_eviction=self.memory_budget.after_eviction)

    @cached_property
    def reranker(self) -> Reranker | None:
        from app.providers.rerankers import build_reranker

        return build_reranker(self.settings)

    @cached_property
    def retriever(self) -> HybridRetriever:
        from app.retrieval.hybrid import build_retriever

        return build_retriever(
            self.settings,
            self.embedder,
            self.corpus,
            self.reranker,
            after_eviction=self.memory_budget.after_eviction,
            second=self.corpus.second_dense,
            english=self.corpus.english_dense,
        )

    @cached_property
    def llm(self) -> LLM:
        if self._providers is not None and self._providers.llm is not None:
            return self._providers.llm
        from app.providers.llms import build_llm

        return build_llm(self.settings)

    @cached_property
    def request_limits(self) -> RequestLimits:
        """The configured input caps every service checks and /openapi.json documents."""
        return self.settings.request_limits

    @cached_property
    def answer_deps(self) -> AnswerDeps:
        """What the answer service needs (builds the retriever and the LLM)."""
        from app.generation.answer_limits import GenerationLimits
        from app.services.answer import AnswerDeps

        return AnswerDeps(
            retriever=self.retriever,
            llm=self.llm,
            cache=self.cache,
            corpus_version=self.corpus.corpus_version,
            config_fingerprint=self.config_fingerprint,
            limits=self.request_limits,
            generation=GenerationLimits.from_settings(self.settings),
            answer_log=self.answer_log,
            embedder=self.embedder,
        )

    @cached_property
    def answer_log(self) -> AnswerLog:
        """Answer ids' records, kept RAG_ANSWER_LOG_DAYS (ids only with 0)."""
        from app.services.blocks.answer_log import AnswerLog
        from app.storage.answer_records import AnswerRecordStore

        store = AnswerRecordStore(self.database)
        return AnswerLog(store, self.settings.answer_log_days, self.llm.model_id)

    @cached_property
    def evaluation_runs(self) -> EvaluationRunStore:
        from app.jobs.evaluation_runs import EvaluationRunStore

        return EvaluationRunStore(self.database)

    @cached_property
    def evaluation_set_deps(self) -> SetDeps:
        """What making and reading a tenant's evaluation sets needs."""
        from app.services.evaluation_sets import SetDeps
        from app.storage.evaluation_sets import EvaluationSetStore
        from app.storage.feedback import FeedbackStore

        return SetDeps(
            sets=EvaluationSetStore(self.database),
            documents=self.documents,
            feedback=FeedbackStore(self.database),
            audit=self.audit_log,
            limits=self.request_limits,
        )

    @cached_property
    def evaluation_run_deps(self) -> RunDeps:
        """What starting, reading and comparing evaluation runs needs."""
        from app.answer_shape import answer_shape
        from app.services.evaluation_runs import RunDeps

        def enqueue(job: JobRecord) -> None:
            self.job_queue.enqueue(job)
            self.evaluation_runner.wake()  # the Redis backend: runs that answer run here

        return RunDeps(
            runs=self.evaluation_runs,
            sets=self.evaluation_set_deps.sets,
            documents=self.documents,
            audit=self.audit_log,
            corpus_version=self.corpus.corpus_version,
            shape=answer_shape(self.settings),
            jobs=self.jobs,
            queued_jobs_limit=self.settings.quota_queued_jobs,
            enqueue=enqueue,
        )

    def scope_of_user(
        self, tenant_id: str, user_id: str, collections: tuple[str, ...] | None = None
    ) -> SearchScope | None:
        """What a user of the tenant reads now, within `collections` when given (None: no
        longer an enabled user of it)."""
        from app.services.search_scope import request_scope

        user = self.user_store.get(user_id)
        if user is None or user.tenant_id != tenant_id or user.disabled:
            return None
        access = self.collection_access.resolve(
            tenant_id=tenant_id, user_id=user_id, role=user.role, key_collections=collections
        )
        return request_scope(self.search_scopes, access, None, None)

    @cached_property
    def evaluation_runner(self) -> EvaluationRunner:
        """What executes evaluation runs' jobs (for the job pool or a worker; with the Redis
        backend, the API process's thread that claims the runs that answer)."""
        from app.job_runners.evaluation import EvaluationRunner, RunnerDeps

        # The retriever and the model are read when a run needs them.
        settings = self.settings
        deps = RunnerDeps(
            runs=self.evaluation_runs,
            jobs=self.jobs,
            sets=self.evaluation_set_deps.sets,
            search=lambda tenant, question, k, scope: self.retriever.search(
                tenant, question, k, scope=scope
            ),
            scope_of_user=self.scope_of_user,
            lane=lambda: self.answer_lane,
            answers=lambda: self.answer_deps,
            query_rate=self.rate_limiter.hit,
            query_per_minute=settings.rate_limit_query_per_minute,
            max_running_per_tenant=settings.max_running_jobs_per_tenant,
            heartbeat_s=settings.job_heartbeat_s,
        )
        return EvaluationRunner(deps)

    @cached_property
    def feedback_deps(self) -> FeedbackDeps:
        """What rating answers and listing the ratings need."""
        from app.services.feedback import FeedbackDeps
        from app.storage.feedback import FeedbackStore

        return FeedbackDeps(
            records=self.answer_log.store,
            feedback=FeedbackStore(self.database),
            audit=self.audit_log,
            documents=self.documents,
        )

    @cached_property
    def follow_up_deps(self) -> FollowUpDeps:
        """What answering a follow-up (a conversation turn, a chat completion) needs."""
        from app.services.conversations import FollowUpDeps, RewriteConfig

        rewrite = RewriteConfig.from_settings(self.settings)
        return FollowUpDeps(lane=self.answer_lane, answers=self.answer_deps, rewrite=rewrite)

    @cached_property
    def conversation_deps(self) -> ConversationDeps:
        """What the conversation routes need: the store and the follow-up answering."""
        from app.services.conversations import ConversationDeps

        return ConversationDeps(
            store=self.conversations,
            follow_ups=self.follow_up_deps,
            max_turns=self.settings.conversation_max_turns,
        )

    @cached_property
    def readiness_checks(self) -> dict[str, Callable[[], bool]]:
        """What /ready probes, by component; each builds its component only when run."""
        from app.services.readiness import vector_store_answers

        return {
            "database": lambda: self.database.ping(),
            "vector_store": lambda: vector_store_answers(self.corpus),
        }

    @cached_property
    def ocr_problem(self) -> str | None:
        """Why OCR of scans and images is unavailable (Tesseract or a language missing), or
        None; checked once per process, so installing Tesseract needs a restart."""
        from app.ingestion.ocr import ocr_status

        return ocr_status(self.settings.ocr_tesseract_cmd)

    @cached_property
    def stats_deps(self) -> StatsDeps:
        """What /stats reads."""
        from app.services.stats import StatsDeps

        return StatsDeps(
            documents=self.documents,
            jobs=self.jobs,
            cache=self.cache,
            count_chunks=self.corpus.count,
            storage_quota=self.storage_quota,
            queued_jobs_limit=self.settings.quota_queued_jobs,
            ocr_pages_limit=self.settings.quota_ocr_pages,
            conversations=self.conversations,
        )

    @cached_property
    def page_deps(self) -> PageDeps:
        """What the cited-page routes read."""
        from app.rendering.cache import FailedPages
        from app.services.pages import PageDeps

        return PageDeps(
            documents=self.documents,
            chunks=self.chunk_records,
            originals=self.originals,
            render_limits=self.render_limits,
            failures=FailedPages(self.settings.page_render_failure_ttl_s),
        )

    @cached_property
    def page_lane(self) -> PageLane:
        """The render slots and threads of page pictures (never the default threadpool)."""
        from app.services.blocks.page_lane import PageLane

        return PageLane(self.settings)

    @cached_property
    def render_limits(self) -> RenderLimits:
        """Bounds on drawing a page: picture and image sizes, the child's time, memory, CPU."""
        from app.rendering.pdf_page import RenderLimits

        return RenderLimits.from_settings(self.settings)

    @cached_property
    def originals(self) -> KeptOriginals:
        """The kept original PDFs (for page pictures) and the pictures cached from them."""
        from app.rendering.image_pdf import PixelCaps
        from app.rendering.pdf_page import RenderLimits
        from app.services.pages import KeptOriginals, originals_dir

        settings = self.settings
        # An image becomes its kept PDF in a child with the parse child's bounds: the work is
        # a second pass over the frames the parse child read.
        image_limits = RenderLimits(
            timeout_s=settings.parse_timeout_s,
            max_memory_bytes=settings.parse_max_memory_mb * 1024 * 1024,
            max_cpu_s=settings.parse_max_cpu_s,
        )
        return KeptOriginals(
            originals_dir(settings.data_dir),
            self.page_images,
            self.render_limits,
            image_limits,
            PixelCaps(settings.ocr_max_image_pixels, settings.ocr_max_total_pixels),
        )

    @cached_property
    def storage_quota(self) -> StorageQuota:
        """The per-tenant storage quotas configured by RAG_QUOTA_*."""
        from app.jobs.store import StorageQuota

        return StorageQuota.from_settings(self.settings)

    @cached_property
    def upload_deps(self) -> UploadDeps:
        """What accepting uploads and reading their jobs needs (builds the job queue)."""
        from app.services.uploads import UploadDeps

        return UploadDeps(
            jobs=self.jobs,
            queue=self.job_queue,
            uploads_dir=self.settings.data_dir / "uploads",
            max_upload_bytes=self.settings.max_upload_bytes,
            quota=self.storage_quota,
            queued_jobs_limit=self.settings.quota_queued_jobs,
            documents=self.documents,
            audit=self.audit_log,
        )

    @cached_property
    def document_deps(self) -> DocumentDeps:
        """What indexing, listing and deleting documents needs (builds the retriever)."""
        from app.services.indexing import DocumentDeps

        return DocumentDeps(
            documents=self.documents,
            corpus=self.corpus,
            embedder=self.embedder,
            cache=self.cache,
            refresh_keywords=self.retriever.refresh,
            named_lock=self.database.named_lock,
            originals=self.originals,
            pipeline=self.pipeline_config,
            chunk_quota=self.settings.quota_chunks,
            ocr_page_quota=self.settings.quota_ocr_pages,
            events=self.document_events,
        )

    @cached_property
    def ingest_deps(self) -> IngestDeps:
        """What running ingestion jobs needs, in the API's pool or a worker process."""
        from app.job_runners.runner import IngestDeps
        from app.jobs.store import COLLECTION_DELETE, EVALUATION_RUN
        from app.services.collection_deletion import DeletionDeps, run_collection_deletion

        trace_of = self.trace_carriers.recall if tracing.wanted(self.settings) else None
        settings = self.settings
        jobs = self.jobs

        def others_waiting(tenant_id: str) -> bool:
            return jobs.others_waiting(tenant_id, settings.max_running_jobs_per_tenant)

        deletion = DeletionDeps(
            jobs, self.access_store, lambda: self.document_deps, self.document_events
        )
        return IngestDeps(
            jobs,
            self.documents,
            indexing=lambda: self.document_deps,
            trace_of=trace_of,
            job_timeout_s=settings.job_timeout_s,
            ocr_pages_per_turn=settings.ocr_pages_per_turn,
            others_waiting=others_waiting,
            events=self.document_events,
            run_alone={
                COLLECTION_DELETE: partial(run_collection_deletion, deletion),
                EVALUATION_RUN: lambda job: self.evaluation_runner.run_job(job),
            },
        )

    @cached_property
    def answer_lane(self) -> AnswerLane:
        from app.services.blocks.answer_lane import AnswerLane

        return AnswerLane(self.settings)

    @cached_property
    def database(self) -> Database:
        from app.storage.db import database_from_settings

        return database_from_settings(self.settings)

    @cached_property
    def user_store(self) -> UserStore:
        from app.storage.users import UserStore

        return UserStore(self.database, self.settings.quota_users)

    @cached_property
    def users(self) -> UserService:
        from app.services.users import UserService

        return UserService(self.user_store, self.settings.bcrypt_rounds)

    @cached_property
    def audit_log(self) -> AuditLog:
        """The audit log, pruned to RAG_AUDIT_RETENTION_DAYS."""
        from app.services.audit import AuditLog
        from app.storage.audit import AuditStore

        return AuditLog(AuditStore(self.database), self.settings.audit_retention_days)

    @cached_property
    def api_key_hasher(self) -> ApiKeyHasher:
        from app.security import ApiKeyHasher, resolve_api_key_secret

        return ApiKeyHasher(resolve_api_key_secret(self.settings))

    @cached_property
    def api_key_store(self) -> ApiKeyStore:
        """API keys and their owners in the service database (one for issuing and checking)."""
        from app.storage.api_keys import ApiKeyStore

        return ApiKeyStore(self.database)

    @cached_property
    def api_keys(self) -> ApiKeyService:
        from app.services.api_keys import ApiKeyService

        return ApiKeyService(
            self.api_key_store, self.api_key_hasher, self.settings.max_keys_per_user
        )

    @cached_property
    def revoked_tokens(self) -> RevokedTokens:
        """Signed-out tokens (RAG_REVOCATION_BACKEND: the database or Redis)."""
        from app.storage.revoked_tokens import build_revoked_tokens

        return build_revoked_tokens(self.settings, self.database)

    @cached_property
    def authenticator(self) -> Authenticator:
        """Checks every request's bearer credential: an access token or an API key."""
        from app.services.auth import Authenticator

        return Authenticator(
            self.token_codec,
            self.user_store,
            self.api_key_store,
            self.api_key_hasher,
            self.revoked_tokens,
            self.single_sign_on.user_for_access_token,
        )

    @cached_property
    def single_sign_on(self) -> SingleSignOn:
        """The tenants' identity providers (configuration, sign-in, their access tokens)."""
        from app.services.sso.memberships import GroupsFollowProvider
        from app.services.sso.provider import OidcProviders
        from app.services.sso.signin import SingleSignOn
        from app.storage.secret_box import build_secret_box
        from app.storage.sso import SsoStore

        return SingleSignOn(
            SsoStore(self.database),
            build_secret_box(self.settings),
            OidcProviders(self.settings.sso_http_timeout_s, self.settings.sso_jwks_cache_s),
            self.user_store,
            self.token_codec,
            self.audit_log,
            allow_http=self.settings.sso_allow_http,
            own_issuer=self.settings.jwt_issuer,
            memberships=GroupsFollowProvider(self.access_store),
        )

    @cached_property
    def token_codec(self) -> TokenCodec:
        from app.security import build_token_codec

        return build_token_codec(self.settings)

    @cached_property
    def jobs(self) -> JobStore:
        from app.jobs.store import JobStore

        store = JobStore(self.database)
        if self.ending_bell is not None:  # other processes wait on the jobs this one ends
            store.endings.announce = self.ending_bell.announce
        return store

    @cached_property
    def ending_bell(self) -> RedisEndingBell | None:
        """With the `redis` job backend: job ends announced to and heard from other processes."""
        if self.settings.job_backend != "redis":
            return None
        from app.jobs.ending_bell import RedisEndingBell, ending_channel
        from app.jobs.redis_queue import queue_name
        from app.storage.redis_client import connect_redis

        client = connect_redis(self.settings.redis_url)
        return RedisEndingBell(client, ending_channel(queue_name(self.settings)))

    def queue_depths(self) -> dict[str, QueueBacklog]:
        """The ingestion queue's waiting jobs and the oldest one's wait (seconds), for metrics;
        the job table is the truth for both backends (rq only carries the ids)."""
        return {"ingest": self.jobs.queued_summary()}

    @cached_property
    def job_queue(self) -> JobQueue:
        """Where uploads' jobs go (RAG_JOB_BACKEND); the API process starts and stops it."""
        from app.job_runners.runner import run_jobs
        from app.jobs.queue import build_job_queue

        def run_batch(batch: list[JobRecord]) -> list[str]:
            return run_jobs(self.ingest_deps, batch)  # built on the first batch, not here

        queue = build_job_queue(self.settings, self.jobs, run_batch, self.ending_bell)
        if not tracing.wanted(self.settings):
            return queue
        from app.jobs.trace_carriers import TracedQueue

        return TracedQueue(queue, self.trace_carriers)

    @cached_property
    def trace_carriers(self) -> TraceCarriers:
        """Where queued jobs' trace carriers wait for the thread or worker that runs them."""
        from app.jobs.trace_carriers import MemoryCarriers, RedisCarriers

        if self.settings.job_backend != "redis":
            return MemoryCarriers()
        from app.jobs.redis_queue import queue_name
        from app.storage.redis_client import connect_redis

        return RedisCarriers(connect_redis(self.settings.redis_url), queue_name(self.settings))

    @cached_property
    def webhook_store(self) -> WebhookStore:
        from app.storage.webhooks import WebhookStore

        return WebhookStore(self.database)

    @cached_property
    def webhook_rules(self) -> UrlRules:
        """Where webhooks may point (RAG_WEBHOOK_ALLOW_PRIVATE; https in production)."""
        from app.services.blocks.webhook_urls import UrlRules

        settings = self.settings
        return UrlRules(settings.env == "production", settings.webhook_allow_private)

    @cached_property
    def webhook_deps(self) -> WebhookDeps:
        from app.services.webhooks import WebhookDeps

        return WebhookDeps(self.webhook_store, self.webhook_rules)

    @cached_property
    def webhook_dispatcher(self) -> WebhookDispatcher:
        """Sends queued webhook events; started by the process that runs jobs."""
        from app.services.blocks.webhook_delivery import WebhookDispatcher
        from app.services.webhooks import CreatorReads

        return WebhookDispatcher(
            self.webhook_store,
            self.webhook_rules,
            self.settings.webhook_retry_base_s,
            may_deliver=CreatorReads(self.user_store, self.collection_access),
        )

    @cached_property
    def document_events(self) -> DocumentEvents:
        """Queues document events for webhooks (and wakes this process's dispatcher)."""
        from app.services.webhooks import DocumentEvents

        return DocumentEvents(
            self.webhook_store, wake=self.webhook_dispatcher.wake, collections=self.access_store
        )

    @cached_property
    def documents(self) -> DocumentStore:
        from app.storage.documents import DocumentStore

        return DocumentStore(self.database)

    @cached_property
    def conversations(self) -> ConversationStore:
        from app.storage.conversations import ConversationStore

        return ConversationStore(self.database, self.conversation_quota)

    @cached_property
    def conversation_quota(self) -> ConversationQuota:
        """The conversation quotas configured by RAG_QUOTA_CONVERSATION*."""
        from app.storage.conversations import ConversationQuota

        return ConversationQuota.from_settings(self.settings)

    @cached_property
    def chunk_records(self) -> ChunkStore:
        from app.storage.chunks import ChunkStore

        return ChunkStore(self.database)

    @cached_property
    def page_images(self) -> PageImageCache:
        from app.rendering.cache import PageImageCache

        return PageImageCache(self.settings.page_image_cache_mb * 1024 * 1024)

    @cached_property
    def cache(self) -> AnswerCache:
        from app.storage.cache import build_cache

        return build_cache(self.settings)

    @cached_property
    def rate_limiter(self) -> RateLimiter:
        from app.storage.rate_limit import build_rate_limiter

        return build_rate_limiter(self.settings)

    @cached_property
    def login_guard(self) -> LoginGuard:
        from app.services.login import build_login_guard

        return build_login_guard(self.settings, self.users, self.rate_limiter, self.audit_log)

    @cached_property
    def config_fingerprint(self) -> str:
        from app.storage.cache import config_fingerprint

        return config_fingerprint(self.settings)

    @cached_property
    def pipeline_config(self) -> PipelineConfig:
        return PipelineConfig.from_settings(self.settings)

    def warm_up(self, *, serving: bool) -> None:
        """Build and load everything now, so configuration errors fail start-up, not a request.

        `serving` also loads what only the API needs (token codec, LLM, dummy password hash).
        A process that runs ingestion jobs (a worker, or an API process with the threads job
        backend) also starts its passage-embedding child, so the first upload does not wait for
        the model to load there.
        """
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        _ = self.database, self.documents, self.jobs, self.cache
        if not serving or self.settings.job_backend == "threads":
            start_child = getattr(self.embedder, "start_child", None)  # local models only
            if callable(start_child):
                start_child()  # it loads its model while this process loads its own
        _warm_up(self.embedder, serving)
        _ = self.corpus, self.retriever
        for arm in (self.second_arm, self.english_arm):  # built with the corpus
            if arm is not None:
                if not serving or self.settings.job_backend == "threads":
                    start_child = getattr(arm.embedder, "start_child", None)
                    if callable(start_child):
                        start_child()
                _warm_up(arm.embedder, serving)
        if serving:
            _ = self.token_codec, self.rate_limiter, self.login_guard, self.authenticator
            self.audit_log.prune_now_and_then()
            self.answer_log.prune_now_and_then()  # records past RAG_ANSWER_LOG_DAYS
            self.users.warm_up()
            load = getattr(self.llm, "warm_up", None)  # only in-process models have weights
            if callable(load):
                load()

    def close(self) -> None:
        """Release what holds threads (the answer and page lanes), if they were built."""
        for name in ("answer_lane", "page_lane"):
            lane = self.__dict__.get(name)
            if lane is not None:
                lane.shutdown()


def _warm_up(embedder: Embedder, serving: bool) -> None:
    """Load the embedding model now. An API process embeds questions itself; a worker embeds
    none, so it only asks the dimension (from its embedding child, for the local models, so
    it does not hold the model twice)."""
    if serving:
        embedder.embed_query("warm up")
    else:
        _ = embedder.dimension
