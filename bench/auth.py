"""Authentication cost per request: what `get_principal` spends before a route runs.

Workloads, each the real code path on a real database (SQLite file by default, or PostgreSQL
with --database-url), interleaved in rounds so machine noise hits them alike:

- `jwt signature`: the HS256 check alone (no database), for reference;
- `jwt + user row`: signature and the user's row (what every request paid before roles);
- `jwt + revocation`: the full token path now: signature, user row (role, disabled, session
  version) and the revocation list (`jti`);
- `api key`: the full key path: format check, HMAC-SHA256, key row by hash, user row (its
  last-use write happens at most once a minute, so not in the steady state measured here).

Target: the key check within 1 ms of the token check.

    python -m bench.auth [--iterations 2000] [--database-url postgresql+psycopg://...]
    [--revocation redis]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from app.config import load_settings
from app.container import Container
from app.services.audit import Actor
from app.services.auth import Identity
from bench.common import percentile, table

SECRET = "bench-auth-secret-Zq8vN2pL7wXc4RtY9uBm1sDf6GhJ0-not-for-production"


def _timed(check: Callable[[], object], rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        check()
        samples.append((time.perf_counter() - started) * 1e6)  # microseconds
    return samples


def run(iterations: int, data_dir: Path, database_url: str, revocation: str) -> list[list[object]]:
    """Time every workload; one table row each."""
    settings = load_settings(
        _env_file=None,
        env="production",
        data_dir=data_dir,
        database_url=database_url,
        jwt_secret=SECRET,
        bcrypt_rounds=12,
        revocation_backend=revocation,
    )
    container = Container(settings)
    user = container.users.create_user(
        tenant_id="bench-auth", username=f"bench-{time.time_ns()}", password=SECRET[:20]
    )
    token = container.token_codec.issue(user.id, user.tenant_id).access_token
    owner = Identity(user.id, user.tenant_id, user.username, user.role)
    key = container.api_keys.create(owner, Actor(user.tenant_id, user.id, "bench"), "bench").key
    # A few revoked tokens, so the revocation lookup is not on an empty table.
    for _ in range(100):
        other = container.token_codec.issue(user.id, user.tenant_id).access_token
        claims = container.authenticator.authenticate(other)
        container.authenticator.log_out(claims, Actor(user.tenant_id, user.id, "bench"), False)
    codec, users, auth = container.token_codec, container.user_store, container.authenticator

    def jwt_and_user() -> object:
        claims = codec.verify(token)
        return users.get(claims.user_id)

    workloads: dict[str, Callable[[], object]] = {
        "jwt signature": lambda: codec.verify(token),
        "jwt + user row": jwt_and_user,
        "jwt + revocation": lambda: auth.authenticate(token),
        "api key": lambda: auth.authenticate(key),
    }
    for check in workloads.values():  # warm caches, pools and prepared statements
        _timed(check, 50)
    samples: dict[str, list[float]] = {name: [] for name in workloads}
    rounds = 20
    for _ in range(rounds):
        for name, check in workloads.items():
            samples[name] += _timed(check, max(1, iterations // rounds))
    base = percentile(samples["jwt + revocation"], 50)
    rows: list[list[object]] = []
    for name, values in samples.items():
        p50, p95 = percentile(values, 50), percentile(values, 95)
        rows.append([name, len(values), p50, p95, p50 / base])
    container.database.dispose()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--database-url", default="", help="default: a SQLite file in a temp dir")
    parser.add_argument("--revocation", choices=("database", "redis"), default="database")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-auth-") as folder:
        rows = run(args.iterations, Path(folder), args.database_url, args.revocation)
    where = args.database_url.split("@")[-1] if args.database_url else "SQLite"
    print(f"auth per request on {where}, revocation list in {args.revocation}")
    headers = ["workload", "n", "p50 us", "p95 us", "p50 / jwt+revocation"]
    print(table(headers, rows))
    by_name = {row[0]: row for row in rows}
    gap_ms = (float(by_name["api key"][2]) - float(by_name["jwt + revocation"][2])) / 1000  # type: ignore[arg-type]
    print(f"api key minus jwt + revocation, p50: {gap_ms:+.3f} ms (target: within 1 ms)")


if __name__ == "__main__":
    main()
