"""The `rag` command: log in, upload, sync a folder, search, ask, list documents and jobs.

Every command takes --json: then stdout holds exactly one JSON document (errors too), and
progress and logs go to stderr. Exit codes: 0 all succeeded, 1 some files (or the request)
failed, 2 bad usage or authentication.
"""

from __future__ import annotations

import getpass
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from rag_client import __version__
from rag_client.config import config_path, resolve, save_config
from rag_client.errors import (
    EXIT_OK,
    EXIT_SOME_FAILED,
    EXIT_USAGE,
    ApiError,
    RagClientError,
    UsageError,
)
from rag_client.http import Api, require_key
from rag_client.progress import UploadProgress
from rag_client.sync import (
    DEFAULT_COLLECTION,
    Filters,
    Summary,
    default_label,
    delete_document,
    make_plan,
    record_upload,
    remote_documents,
    scan,
    upload_requests,
)
from rag_client.transfer import (
    UNFINISHED,
    UploadRequest,
    UploadResult,
    list_all,
    settle,
    upload_all,
    wait_for_jobs,
)

WATCH_DEBOUNCE_MS = 1500  # a burst of changes is gathered at most this long, then synced
WATCH_TICK_MS = 500  # the watcher reports "no change" this often (the cue for the first sync)

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False)


class Context:
    """What every command shares: where the service is, the key, and how to print."""

    def __init__(self, url: str | None, api_key: str | None) -> None:
        self.flag_url = url
        self.flag_key = api_key
        self.as_json = False

    def api(self, need_key: bool = True) -> Api:
        """A client of the configured service (UsageError without a key when one is needed)."""
        connection = resolve(self.flag_url, self.flag_key)
        key = require_key(connection.api_key) if need_key else connection.api_key
        return Api(connection.url, key, log=lambda line: err.print(line, markup=False))


def _emit(document: Any) -> None:
    """The one JSON document of a --json run."""
    sys.stdout.write(json.dumps(document, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def common_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--json, --url and --api-key on a command (the last two also work before it)."""

    def remember(name: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
        def store(ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
            context = ctx.find_object(Context)
            if context is not None and value not in (None, False):
                setattr(context, name, value)
            return value

        return store

    command = click.option(
        "--json",
        "as_json",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=remember("as_json"),
        help="print one JSON document on stdout (progress and logs go to stderr)",
    )(command)
    command = click.option(
        "--url",
        expose_value=False,
        callback=remember("flag_url"),
        help="the service (default: $RAG_URL, then `rag login`'s)",
    )(command)
    return click.option(
        "--api-key",
        expose_value=False,
        callback=remember("flag_key"),
        help="the API key (default: $RAG_API_KEY, then `rag login`'s)",
    )(command)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", default=None, help="the service (default: $RAG_URL, then `rag login`'s)")
@click.option("--api-key", default=None, help="the API key (default: $RAG_API_KEY, then login's)")
@click.version_option(__version__, prog_name="rag")
@click.pass_context
def cli(ctx: click.Context, url: str | None, api_key: str | None) -> None:
    """Upload, sync, search and ask the RAG service from scripts."""
    ctx.obj = Context(url, api_key)


pass_context = click.make_pass_decorator(Context)


# --- login ---------------------------------------------------------------------------------


@cli.command()
@click.option("--username", default=None, help="make a key by signing in as this user")
@click.option("--tenant", default=None, help="the user's organisation, when needed")
@click.option("--password-stdin", is_flag=True, help="read the password from stdin")
@click.option("--key-name", default="rag command line", show_default=True)
@common_options
@pass_context
def login(
    context: Context,
    username: str | None,
    tenant: str | None,
    password_stdin: bool,
    key_name: str,
) -> None:
    """Save the service URL and an API key in the config file (mode 0600).

    With --api-key (or RAG_API_KEY) that key is checked and saved; with --username, you sign
    in and a new key is made for this machine."""
    api = context.api(need_key=False)
    key = resolve(context.flag_url, context.flag_key).api_key
    if username is not None:
        if password_stdin:
            password = sys.stdin.readline().rstrip("\n")
        else:
            password = getpass.getpass(f"password of {username}: ")
        form = {"username": username, "password": password}
        if tenant:
            form["tenant"] = tenant
        token = api.post("/auth/token", data=form)["access_token"]
        made = api.post(
            "/auth/keys",
            json={"name": key_name},
            headers={"Authorization": f"Bearer {token}"},
        )
        key = made["key"]
    if not key:
        raise UsageError("give --api-key KEY (or RAG_API_KEY), or --username to make a key")
    checked = Api(api.url, key)
    me = checked.get("/auth/me")
    path = config_path()
    save_config(path, api.url, key)
    if context.as_json:
        _emit({"config": str(path), "url": api.url, "username": me.get("username")})
    else:
        out.print(f"logged in to {api.url} as {me.get('username')}; saved in {path}")


# --- upload --------------------------------------------------------------------------------


def _meta(values: tuple[str, ...]) -> dict[str, str]:
    found = {}
    for value in values:
        key, sep, text = value.partition("=")
        if not sep or not key:
            raise UsageError(f"--meta takes key=value, not {value!r}")
        found[key] = text
    return found


def _files_of(paths: tuple[str, ...]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file())
        elif path.is_file():
            files.append(path)
        else:
            raise UsageError(f"no such file or folder: {raw}")
    return files


def _run_uploads(api: Api, requests: list[UploadRequest], concurrency: int) -> list[UploadResult]:
    if not requests:  # nothing changed: no empty bar
        return []
    total = sum(r.path.stat().st_size for r in requests if r.path.exists())
    with UploadProgress(total, len(requests)) as progress:
        return upload_all(api, requests, concurrency, progress.started, progress.finished)


def _wait_for(api: Api, job_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Wait for the jobs, saying so on stderr (and each one that ends)."""
    if job_ids:
        err.print(f"waiting for {len(job_ids)} job(s) to be indexed", markup=False)

    def ended(job: dict[str, Any]) -> None:
        err.print(f"  {job['source']}: {job['status']}", markup=False, highlight=False)

    return wait_for_jobs(api, job_ids, ended)


def _failure_table(rows: list[tuple[str, str]]) -> None:
    table = Table(title="failed", title_justify="left")
    table.add_column("file")
    table.add_column("reason")
    for name, reason in rows:
        table.add_row(name, reason)
    out.print(table)


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--collection", default=None, help="the collection to put them in")
@click.option("--meta", multiple=True, metavar="KEY=VALUE", help="metadata (repeat it)")
@click.option("--wait", is_flag=True, help="wait until every file is indexed or failed")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 32))
@common_options
@pass_context
def upload(
    context: Context,
    paths: tuple[str, ...],
    collection: str | None,
    meta: tuple[str, ...],
    wait: bool,
    concurrency: int,
) -> None:
    """Upload files (folders: every file in them), one job each."""
    metadata = _meta(meta)
    files = _files_of(paths)
    api = context.api()
    requests = [UploadRequest(p, collection=collection, metadata=metadata) for p in files]
    results = _run_uploads(api, requests, concurrency)
    if wait:
        jobs = [r.job_id for r in results if r.job_id]
        settle(results, _wait_for(api, jobs))
    failed = [r for r in results if r.status == "failed"]
    if context.as_json:
        _emit({"files": [r.as_json() for r in results], "failed": len(failed)})
    else:
        for r in results:
            if r.status != "failed":
                out.print(f"{r.path}: {r.status} {r.document_id} {r.job_id or ''}".rstrip())
        if failed:
            _failure_table([(str(r.path), f"{r.error_code}: {r.error}") for r in failed])
    if failed:
        raise SystemExit(EXIT_SOME_FAILED)


# --- sync ----------------------------------------------------------------------------------


def _sync_once(
    context: Context,
    api: Api,
    root: Path,
    label: str,
    collection: str,
    filters: Filters,
    delete: bool,
    dry_run: bool,
    concurrency: int,
    wait: bool,
) -> Summary:
    local = scan(root, filters)
    summary = Summary(dry_run, label, collection)
    try:
        remote = remote_documents(api, collection)
    except ApiError as exc:
        if exc.status not in (403, 404) or not local:
            raise
        # A collection the caller may not read (or none of that name): every file fails
        # with that reason, as its upload would.
        summary.failed = [
            {"source": f.name, "error_code": exc.code, "error": exc.message} for f in local
        ]
        return summary
    plan = make_plan(local, remote, filters, delete, label)
    summary.unchanged = [f.name for f in plan.unchanged]
    if dry_run:
        summary.uploaded = [{"source": f.name} for f in plan.upload]
        summary.replaced = [
            {"source": f.name, "document_id": remote[f.name]["document_id"]} for f in plan.replace
        ]
        summary.deleted = [
            {"source": d["source"], "document_id": d["document_id"]} for d in plan.delete
        ]
        return summary
    requests = upload_requests(plan, label, collection)
    replacing = {f.path for f in plan.replace}
    results = _run_uploads(api, requests, concurrency)
    if wait:
        jobs = [r.job_id for r in results if r.job_id]
        settle(results, _wait_for(api, jobs))
    for request, result in zip(requests, results):
        record_upload(summary, request.path in replacing, result, request.source_path or "")
    for doc in plan.delete:
        reason = delete_document(api, doc)
        entry = {"source": doc["source"], "document_id": doc["document_id"]}
        if reason is None:
            summary.deleted.append(entry)
        else:
            summary.failed.append({**entry, "error_code": "delete_failed", "error": reason})
    return summary


def _print_summary(summary: Summary) -> None:
    verb = "would " if summary.dry_run else ""
    for title, entries in (
        ("upload" if summary.dry_run else "uploaded", summary.uploaded),
        ("replace" if summary.dry_run else "replaced", summary.replaced),
        ("delete" if summary.dry_run else "deleted", summary.deleted),
    ):
        for entry in entries:
            out.print(f"{verb}{title}: {entry['source']}", markup=False)
    for entry in summary.skipped:
        out.print(f"skipped: {entry['source']} ({entry['reason']})", markup=False)
    out.print(
        f"{len(summary.uploaded)} {'to upload' if summary.dry_run else 'uploaded'}, "
        f"{len(summary.replaced)} {'to replace' if summary.dry_run else 'replaced'}, "
        f"{len(summary.unchanged)} unchanged, "
        f"{len(summary.deleted)} {'to delete' if summary.dry_run else 'deleted'}, "
        f"{len(summary.skipped)} skipped, {len(summary.failed)} failed",
        markup=False,
    )
    if summary.failed:
        _failure_table([(e["source"], f"{e['error_code']}: {e['error']}") for e in summary.failed])


@cli.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--collection",
    default=DEFAULT_COLLECTION,
    show_default=True,
    help="the collection to sync into (the files' names are compared within it)",
)
@click.option(
    "--label",
    default=None,
    help="this folder's label on the service (default: the folder's name); --delete touches "
    "only documents of this label",
)
@click.option("--delete", is_flag=True, help="delete the documents whose file is gone")
@click.option("--dry-run", is_flag=True, help="print what would be uploaded, replaced, deleted")
@click.option("--include", multiple=True, metavar="GLOB", help="only files matching (repeat it)")
@click.option("--exclude", multiple=True, metavar="GLOB", help="skip files matching (repeat it)")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 32))
@click.option("--wait", is_flag=True, help="wait until the uploads are indexed or failed")
@click.option("--watch", is_flag=True, help="keep syncing as files change (Ctrl-C stops)")
@common_options
@pass_context
def sync(
    context: Context,
    directory: Path,
    collection: str,
    label: str | None,
    delete: bool,
    dry_run: bool,
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    concurrency: int,
    wait: bool,
    watch: bool,
) -> None:
    """Make the service's documents of this folder match it: upload new files, replace
    changed ones (by content SHA-256), and with --delete remove those whose file is gone."""
    if watch and dry_run:
        raise UsageError("--watch and --dry-run do not go together")
    api = context.api()
    chosen = label or default_label(directory)
    filters = Filters(include, exclude)

    def once() -> Summary:
        return _sync_once(
            context, api, directory, chosen, collection, filters, delete, dry_run, concurrency, wait
        )

    if watch:
        _watch(directory, lambda: _report(context, once()))
        return
    summary = once()
    _report(context, summary)
    if summary.failed:
        raise SystemExit(EXIT_SOME_FAILED)


def _report(context: Context, summary: Summary) -> None:
    if context.as_json:
        _emit(summary.as_json())
    else:
        _print_summary(summary)


def _watch(directory: Path, resync: Callable[[], None]) -> None:
    """Sync once the watcher is up, then again after each burst of changes (debounced), until
    Ctrl-C. The first sync waits for the watcher, so a change made while it runs is not
    missed; Ctrl-C during a sync stops its uploads (as in a plain sync) and ends the watch."""
    from watchfiles import watch

    err.print(f"watching {directory} (Ctrl-C stops)", markup=False)
    synced = False
    try:
        # yield_on_timeout: an empty set soon after the watcher started, the cue to sync first.
        for changes in watch(
            directory,
            debounce=WATCH_DEBOUNCE_MS,
            rust_timeout=WATCH_TICK_MS,
            yield_on_timeout=True,
            raise_interrupt=False,
        ):
            if changes or not synced:
                resync()
                synced = True
    except KeyboardInterrupt:
        pass
    err.print("stopped watching", markup=False)


# --- search and ask ------------------------------------------------------------------------


def _cite(citation: dict[str, Any]) -> str:
    label = citation.get("page_label") or citation.get("page")
    return f"[{citation['marker']}] {citation['source']} p. {label}"


@cli.command()
@click.argument("query")
@click.option("-k", type=click.IntRange(1, 100), default=None, help="how many results")
@common_options
@pass_context
def search(context: Context, query: str, k: int | None) -> None:
    """Rank passages for a query."""
    body: dict[str, Any] = {"query": query}
    if k is not None:
        body["k"] = k
    found = context.api().post("/search", json=body)
    if context.as_json:
        _emit(found)
        return
    for hit in found["results"]:
        label = hit.get("page_label") or hit.get("page")
        text = " ".join(str(hit.get("text", "")).split())[:200]
        out.print(f"{hit['rank']}. {hit['source']} p. {label} ({hit['score']:.3f})", markup=False)
        out.print(f"   {text}", markup=False)


@cli.command()
@click.argument("question")
@click.option("--stream", is_flag=True, help="print the answer as it is written")
@click.option("-k", type=click.IntRange(1, 100), default=None, help="passages to answer from")
@common_options
@pass_context
def ask(context: Context, question: str, stream: bool, k: int | None) -> None:
    """Answer a question from the documents, then list its citations as `[n] file p. label`."""
    body: dict[str, Any] = {"question": question}
    if k is not None:
        body["k"] = k
    api = context.api()
    if stream:
        answered = _stream_answer(api, body, show=not context.as_json)
    else:
        answered = api.post("/query", json=body)
        if not context.as_json:
            out.print(answered["answer"], markup=False)
    if context.as_json:
        _emit(answered)
        return
    if answered.get("citations"):
        out.print()
        for citation in answered["citations"]:
            out.print(_cite(citation), markup=False)


def _stream_answer(api: Api, body: dict[str, Any], show: bool) -> dict[str, Any]:
    """Follow /query/stream's events, printing tokens as they come; the whole answer."""
    answer: list[str] = []
    answered: dict[str, Any] = {"citations": []}
    event = ""
    for line in api.stream_lines("POST", "/query/stream", json=body):
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data = json.loads(line[5:])
            if event == "token":
                answer.append(data["text"])
                if show:
                    sys.stdout.write(data["text"])
                    sys.stdout.flush()
            elif event == "citations" or event == "done":
                answered.update(data)
            elif event == "error":
                error = data.get("error", data)
                raise ApiError(500, str(error.get("code")), str(error.get("message")))
    if show:
        sys.stdout.write("\n")
    answered["answer"] = "".join(answer)
    return answered


# --- documents, jobs, collections ------------------------------------------------------------


@cli.group()
def docs() -> None:
    """List, show and delete documents."""


@docs.command("ls")
@click.option("--prefix", default=None, help="only names starting with this")
@click.option("--sync-root", default=None, help="only documents of this sync folder label")
@common_options
@pass_context
def docs_ls(context: Context, prefix: str | None, sync_root: str | None) -> None:
    """List the documents."""
    params: dict[str, Any] = {}
    if prefix is not None:
        params["source_prefix"] = prefix
    if sync_root is not None:
        params["sync_root"] = sync_root
    found = list_all(context.api(), "/documents", params)
    if context.as_json:
        _emit({"data": found, "count": len(found)})
        return
    table = Table()
    for column in ("document_id", "source", "status", "pages", "chunks"):
        table.add_column(column)
    for doc in found:
        table.add_row(
            *(str(doc.get(c, "")) for c in ("document_id", "source", "status", "pages", "chunks"))
        )
    out.print(table)


@docs.command("show")
@click.argument("document_id")
@common_options
@pass_context
def docs_show(context: Context, document_id: str) -> None:
    """Show one document."""
    doc = context.api().get(f"/documents/{document_id}")
    if context.as_json:
        _emit(doc)
        return
    for key, value in doc.items():
        out.print(f"{key}: {value}", markup=False)


@docs.command("rm")
@click.argument("document_ids", nargs=-1, required=True)
@common_options
@pass_context
def docs_rm(context: Context, document_ids: tuple[str, ...]) -> None:
    """Delete documents."""
    api = context.api()
    failed = []
    for document_id in document_ids:
        try:
            api.request("DELETE", f"/documents/{document_id}")
        except ApiError as exc:
            if exc.status == 401:
                raise
            failed.append(
                {"document_id": document_id, "error_code": exc.code, "error": exc.message}
            )
    deleted = [d for d in document_ids if d not in {f["document_id"] for f in failed}]
    if context.as_json:
        _emit({"deleted": deleted, "failed": failed})
    else:
        for document_id in deleted:
            out.print(f"deleted {document_id}")
        if failed:
            _failure_table([(f["document_id"], f"{f['error_code']}: {f['error']}") for f in failed])
    if failed:
        raise SystemExit(EXIT_SOME_FAILED)


@cli.command()
@click.option("--wait", is_flag=True, help="wait until no job is queued or processing")
@common_options
@pass_context
def jobs(context: Context, wait: bool) -> None:
    """List the ingestion jobs (newest first)."""
    api = context.api()
    if wait:
        pending = list_all(api, "/jobs", {"status": list(UNFINISHED)})
        # The listing is newest first; the wait takes the jobs in the order they were queued.
        wait_for_jobs(api, [job["job_id"] for job in reversed(pending)])
    found = list_all(api, "/jobs", {}) if not wait else api.get("/jobs")["data"]
    if context.as_json:
        _emit({"data": found, "count": len(found)})
        return
    for job in found:
        line = f"{job['job_id']} {job['status']:<10} {job['source']}"
        if job.get("error_code"):
            line += f"  {job['error_code']}: {job.get('error')}"
        out.print(line, markup=False)


@cli.group()
def collections() -> None:
    """The collections of documents."""


@collections.command("ls")
@common_options
@pass_context
def collections_ls(context: Context) -> None:
    """List the collections."""
    found = context.api().get("/collections")
    if context.as_json:
        _emit(found)
        return
    for item in found.get("data", []):
        name = item.get("name") or item.get("collection_id")
        out.print(f"{name} {item.get('documents', '')}".rstrip(), markup=False)


# --- entry point ---------------------------------------------------------------------------


def run(argv: list[str] | None = None) -> int:
    """Run `rag`; the exit code (0 all succeeded, 1 some failed, 2 usage or authentication)."""
    try:
        cli.main(args=argv, prog_name="rag", standalone_mode=False, obj=None)
    except click.exceptions.Exit as done:
        return int(done.exit_code)
    except click.ClickException as exc:
        exc.show()
        return EXIT_USAGE
    except click.Abort:
        err.print("interrupted")
        return 130
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    except RagClientError as exc:
        _report_error(exc, argv)
        return exc.exit_code
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return EXIT_OK


def _report_error(exc: RagClientError, argv: list[str] | None) -> None:
    words = sys.argv[1:] if argv is None else argv
    if "--json" in words:
        _emit({"error": {"code": exc.code, "message": exc.message}})
    err.print(f"error: {exc.message}", markup=False)


def main() -> None:
    """The console script."""
    sys.exit(run())


if __name__ == "__main__":  # pragma: no cover
    main()
