"""Command line: `python -m app.cli COMMAND`, where COMMAND is ingest, search, reindex,
create-user, list-users, set-role, set-break-glass, disable-user, delete-user, create-key,
set-sso or migrate.

The CLI opens the same data directory as the server; with the embedded store, run it while the
server is stopped (one process owns a Chroma directory) or use the HTTP API instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.exc import OperationalError

from app.config import get_settings, unknown_settings
from app.container import Container
from app.domain import ROLES
from app.errors import RagError
from app.retrieval.grouping import GROUPINGS
from app.services.blocks.pipeline import ProgressCallback
from app.storage.users import UserRecord

# User names are unique per tenant: a name several tenants have needs its tenant.
TENANT_HELP = "the user's tenant; needed when several tenants have the user name"


def _progress_bar(label: str) -> ProgressCallback:
    def show(done: int, total: int, stage: str) -> None:
        width = 30
        filled = int(width * done / total) if total else width
        bar = "#" * filled + "-" * (width - filled)
        print(f"\r{label} [{bar}] {done}/{total} {stage:<10}", end="", file=sys.stderr, flush=True)

    return show


def cmd_ingest(container: Container, args: argparse.Namespace) -> int:
    """Ingest files synchronously, printing pages and chunks per file (or, with --queue, hand
    them to the running service's workers as uploads and print their job ids)."""
    from app.services.local_files import ingest_local_file, queue_local_file

    if args.queue:
        for raw in args.paths:
            job = queue_local_file(container.upload_deps, tenant_id=args.tenant, path=Path(raw))
            print(f"{job.source}: queued as {job.job_id} ({job.document_id})")
        return 0
    failures = 0
    for raw in args.paths:
        path = Path(raw)
        try:
            doc = ingest_local_file(
                container.document_deps,
                tenant_id=args.tenant,
                path=path,
                progress=_progress_bar(path.name),
            )
        except RagError as exc:
            failures += 1
            print(f"\r{path.name}: FAILED ({exc.code}): {exc.message}", file=sys.stderr)
            continue
        print(f"\r{doc.source}: {doc.pages} pages, {doc.chunks} chunks ({doc.document_id})")
    return 1 if failures else 0


def cmd_search(container: Container, args: argparse.Namespace) -> int:
    """Print ranked chunks with source, page, page label and score."""
    from app.services.search import search

    result = search(
        container.retriever,
        container.request_limits,
        tenant_id=args.tenant,
        query=args.question,
        k=args.k,
        group=args.group,
    )
    rows = [
        {
            "rank": i,
            "document_id": hit.chunk.document_id,
            "source": hit.chunk.source,
            "page": hit.chunk.page,
            "page_label": hit.chunk.page_label,
            "score": round(hit.score, 6),
            "stages": hit.stages,
            "text": hit.chunk.text,
            **({"other_chunks": len(hit.same_document)} if args.group == "document" else {}),
        }
        for i, hit in enumerate(result.hits, start=1)
    ]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return 0
    if not result.relevant:
        print(f"(no passage is relevant enough: {result.reason})")
    for row in rows:
        snippet = " ".join(str(row["text"]).split())[:160]
        more = f"  (+{row['other_chunks']} more)" if row.get("other_chunks") else ""
        print(
            f"{row['rank']:>2}. {row['score']:.4f}  {row['source']}  "
            f"p.{row['page']} ({row['page_label']}){more}\n    {snippet}"
        )
    return 0


def cmd_reindex(container: Container, args: argparse.Namespace) -> int:
    """Re-embed a tenant's chunks with the configured embedding model, and fill its second
    dense arm's collection (RAG_SECOND_EMBEDDING) and its English arm's (RAG_ENGLISH_EMBEDDING)
    if they lack chunks."""
    count = container.corpus.reindex(args.tenant)
    print(f"re-indexed {count} chunks of tenant {args.tenant} with {container.embedder.model_id}")
    corpus = container.corpus
    further_arms = (
        ("second dense arm", container.second_arm, corpus.fill_second, ""),
        ("English arm", container.english_arm, corpus.fill_english, "'s English documents"),
    )
    for name, arm, fill, which in further_arms:
        if arm is not None:
            filled = fill(args.tenant)
            print(
                f"{name}: embedded {filled} chunks of tenant {args.tenant}{which} "
                f"with {arm.model_id}"
            )
    return 0


def cmd_create_user(container: Container, args: argparse.Namespace) -> int:
    """Create a user; the password is read from stdin so it never lands in shell history."""
    password = sys.stdin.readline().rstrip("\r\n")
    user = container.users.create_user(
        tenant_id=args.tenant, username=args.username, password=password, role=args.role
    )
    if args.break_glass:
        user = _set_break_glass(container, args.tenant, user.username, True)
    kind = " break-glass" if user.break_glass else ""
    print(f"created{kind} user {user.username} ({user.role}) in tenant {user.tenant_id}")
    return 0


def _set_break_glass(container: Container, tenant: str, username: str, on: bool) -> UserRecord:
    from app.errors import InvalidInput, NotFound
    from app.services.audit import Actor
    from app.storage.users import UserChange

    user = container.user_store.get_by_username(tenant, username)
    if user is None:
        raise NotFound(f"no user {username!r} in tenant {tenant!r}")
    if on and user.role != "admin":
        raise InvalidInput("a break-glass user must be an admin (set-role --role admin first)")
    actor = Actor(tenant, None, "cli")
    return container.user_store.change(
        tenant, user.id, UserChange(break_glass=on), actor.entry("user.changed")
    )


def cmd_set_break_glass(container: Container, args: argparse.Namespace) -> int:
    """Make an admin a break-glass admin (keeps password sign-in when single sign-on turns it
    off for everyone else), or with --off an ordinary one again."""
    user = _set_break_glass(container, args.tenant, args.username, not args.off)
    state = "a break-glass admin" if user.break_glass else "not a break-glass admin"
    print(f"user {user.username} of tenant {user.tenant_id} is {state}")
    return 0


def cmd_set_sso(container: Container, args: argparse.Namespace) -> int:
    """Set a tenant's identity provider; the client secret is read from stdin (never an
    argument, which shell history and the process list would keep)."""
    from pydantic import ValidationError

    from app.errors import InvalidInput
    from app.services.audit import Actor
    from app.services.sso.config import SsoSettingsIn

    body: dict[str, object] = {}
    if args.settings:
        try:
            body = json.loads(Path(args.settings).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidInput(f"--settings must name a JSON file: {exc}") from None
    body.update({"issuer": args.issuer, "client_id": args.client_id})
    if args.client_secret_stdin:
        body["client_secret"] = sys.stdin.readline().rstrip("\r\n")
    try:
        checked = SsoSettingsIn.model_validate(body)
    except ValidationError as exc:
        raise InvalidInput("; ".join(error["msg"] for error in exc.errors())) from None
    shown = container.single_sign_on.configure(
        tenant_id=args.tenant, body=checked, actor=Actor(args.tenant, None, "cli")
    )
    print(f"single sign-on of tenant {args.tenant}: {shown['display_name']} ({shown['issuer']})")
    return 0


def cmd_list_users(container: Container, args: argparse.Namespace) -> int:
    """List users, optionally of one tenant."""
    for user in container.users.list_users(args.tenant):
        state = "disabled" if user.disabled else "enabled"
        print(f"{user.tenant_id}\t{user.username}\t{user.role}\t{state}\t{user.created_at}")
    return 0


def cmd_set_role(container: Container, args: argparse.Namespace) -> int:
    """Change a user's role (the tenant's last enabled admin stays admin)."""
    user = container.users.operator_change(args.username, role=args.role, tenant=args.tenant)
    print(f"user {user.username} is now {user.role} in tenant {user.tenant_id}")
    return 0


def cmd_disable_user(container: Container, args: argparse.Namespace) -> int:
    """Disable a user (its sessions and API keys end at once), or enable it again."""
    user = container.users.operator_change(
        args.username, disabled=not args.enable, tenant=args.tenant
    )
    print(f"user {user.username} is {'disabled' if user.disabled else 'enabled'}")
    return 0


def cmd_create_key(container: Container, args: argparse.Namespace) -> int:
    """Create an API key of a user for automation; the key is printed once, on stdout."""
    from app.security import secret_problem
    from app.services.audit import Actor
    from app.services.auth import Identity

    settings = container.settings
    if not settings.api_key_secret and secret_problem(settings.jwt_secret) is not None:
        print(
            "error: set RAG_JWT_SECRET (or RAG_API_KEY_SECRET) as the server has it: a key "
            "hashed with a throwaway secret would never be accepted",
            file=sys.stderr,
        )
        return 1
    user = container.users.resolve(args.username, tenant=args.tenant)
    if user.disabled:
        print(f"error: user {args.username} is disabled", file=sys.stderr)
        return 1
    owner = Identity.of_user(user)
    operator = Actor(user.tenant_id, None, "cli")
    issued = container.api_keys.create(owner, operator, args.name, args.role, args.expires_in_days)
    record = issued.record
    print(f"created key {record.key_id} ({record.role}) for {user.username}", file=sys.stderr)
    print(issued.key)
    return 0


def cmd_delete_user(container: Container, args: argparse.Namespace) -> int:
    """Delete a user by name."""
    if not container.users.delete_user(args.username, tenant=args.tenant):
        where = f" in tenant {args.tenant}" if args.tenant else ""
        print(f"error: no user named {args.username}{where}", file=sys.stderr)
        return 1
    print(f"deleted user {args.username}")
    return 0


def cmd_migrate(container: Container, args: argparse.Namespace) -> int:
    """Bring the service database to the newest schema revision (every start-up does this too)."""
    from app.storage.db import Database

    database = Database(container.settings.sqlalchemy_url)
    try:
        change = database.migrate()
    except OperationalError as exc:
        print(f"error: cannot reach the database: {exc.orig}", file=sys.stderr)
        return 1
    finally:
        database.dispose()
    if change.changed:
        print(f"database schema migrated from {change.before or 'nothing'} to {change.after}")
    else:
        print(f"database schema already at {change.after}")
    return 0


Command = Callable[[Container, argparse.Namespace], int]


def _command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, run: Command, help: str
) -> argparse.ArgumentParser:
    """The parser of the sub-command `name`, which `run` carries out."""
    command = sub.add_parser(name, help=help)
    command.set_defaults(run=run)
    return command


def _one_user(command: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`command` with the options naming the one user it acts on (--username, --tenant)."""
    command.add_argument("--username", required=True)
    command.add_argument("--tenant", default=None, help=TENANT_HELP)
    return command


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command."""
    parser = argparse.ArgumentParser(prog="python -m app.cli", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    ingest = _command(sub, "ingest", cmd_ingest, "ingest files into a tenant")
    ingest.add_argument("--tenant", required=True)
    ingest.add_argument("paths", nargs="+")
    ingest.add_argument(
        "--queue",
        action="store_true",
        help="queue the files as upload jobs for the running service's workers (GET /jobs)",
    )

    search = _command(sub, "search", cmd_search, "retrieve ranked chunks (no LLM)")
    search.add_argument("--tenant", required=True)
    search.add_argument("question")
    search.add_argument("-k", type=int, default=None)
    search.add_argument(
        "--group",
        choices=GROUPINGS,
        default="chunk",
        help="chunk: the k best passages; document: the best passage of each of the k best "
        "documents, with how many more of it ranked",
    )
    search.add_argument("--json", action="store_true", help="print a JSON list")

    reindex = _command(
        sub, "reindex", cmd_reindex, "re-embed a tenant with the configured model(s)"
    )
    reindex.add_argument("--tenant", required=True)

    create = _command(sub, "create-user", cmd_create_user, "create a user (password on stdin)")
    create.add_argument("--tenant", required=True)
    create.add_argument("--username", required=True)
    create.add_argument("--password-stdin", action="store_true", required=True)
    create.add_argument(
        "--role",
        choices=ROLES,
        default=None,
        help="default: admin for a tenant's first user, member after",
    )
    create.add_argument(
        "--break-glass",
        action="store_true",
        help="an admin who keeps password sign-in when single sign-on turns it off",
    )

    glass = _command(
        sub, "set-break-glass", cmd_set_break_glass, "make an admin a break-glass admin"
    )
    glass.add_argument("--tenant", required=True)
    glass.add_argument("--username", required=True)
    glass.add_argument("--off", action="store_true", help="make it an ordinary admin again")

    sso = _command(sub, "set-sso", cmd_set_sso, "set a tenant's OpenID Connect provider")
    sso.add_argument("--tenant", required=True)
    sso.add_argument("--issuer", required=True)
    sso.add_argument("--client-id", required=True)
    sso.add_argument(
        "--client-secret-stdin",
        action="store_true",
        help="read the client secret from stdin (leave out to keep the stored one)",
    )
    sso.add_argument(
        "--settings",
        default=None,
        help="a JSON file with the other fields of PUT /sso (role_groups, default_role, ...)",
    )

    listing = _command(sub, "list-users", cmd_list_users, "list users")
    listing.add_argument("--tenant", default=None)

    set_role = _one_user(_command(sub, "set-role", cmd_set_role, "change a user's role"))
    set_role.add_argument("--role", choices=ROLES, required=True)

    disable = _one_user(
        _command(
            sub, "disable-user", cmd_disable_user, "disable a user (ends its sessions and keys)"
        )
    )
    disable.add_argument("--enable", action="store_true", help="enable the user again instead")

    key = _one_user(
        _command(sub, "create-key", cmd_create_key, "create an API key of a user (printed once)")
    )
    key.add_argument("--name", required=True, help="what the key is for")
    key.add_argument("--role", choices=ROLES, default=None, help="default: the user's role")
    key.add_argument("--expires-in-days", type=int, default=None)

    _one_user(_command(sub, "delete-user", cmd_delete_user, "delete a user"))
    _command(sub, "migrate", cmd_migrate, "migrate the database schema to the newest revision")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; typed errors become a one-line message and exit status 1."""
    args = build_parser().parse_args(argv)
    for unknown in unknown_settings(os.environ):  # a misspelt RAG_DATA_DIR would act elsewhere
        print(f"warning: {unknown.message}", file=sys.stderr)
    try:
        container = Container(get_settings())
        code: int = args.run(container, args)
        return code
    except RagError as exc:
        print(f"error ({exc.code}): {exc.message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
