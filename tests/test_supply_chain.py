"""What the service installs is what was reviewed: every Python package pinned with its hashes in
a lock, every image pinned by digest (an audit's finding). Reads files only: no install, no
network; the fresh install from the lock is `scripts/install.sh` itself (docs/development.md)."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from scripts.lock_entries import read_lock, with_dependencies
from tests.dockerfile import instructions

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
LOCKS = {
    "requirements.txt": REPO / "requirements.lock",
    "requirements-dev.txt": REPO / "requirements-dev.lock",
}
CHROMA_LOCK = REPO / "docker" / "chroma" / "requirements.lock"
DOCKERFILES = [REPO / "Dockerfile", *sorted((REPO / "docker").glob("**/Dockerfile"))]
COMPOSE = REPO / "docker-compose.yml"
# name:tag@sha256:<64 hex>, the form a reader can check against the registry.
PINNED_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/-]*:[\w.-]+@sha256:[0-9a-f]{64}$")


def requirements(path: Path) -> list[Requirement]:
    """The requirement lines of a requirements file, its own `-r` includes followed."""
    found: list[Requirement] = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            found += requirements(path.parent / line.removeprefix("-r ").strip())
        elif line:
            found.append(Requirement(line))
    return found


@pytest.mark.parametrize("source", list(LOCKS))
def test_every_requirement_is_pinned_and_hashed_in_its_lock(source: str) -> None:
    entries = read_lock(LOCKS[source])
    for requirement in requirements(REPO / source):
        name = canonicalize_name(requirement.name)
        assert str(requirement.specifier), f"{requirement.name} in {source} has no version pin"
        assert name in entries, f"{requirement.name} is not in {LOCKS[source].name}"
        entry = entries[name]
        assert requirement.specifier.contains(entry.version, prereleases=True), (
            f"{LOCKS[source].name} has {name}=={entry.version}, {source} asks {requirement}: "
            "run scripts/lock.sh"
        )


def test_the_two_issue_pins_are_exact() -> None:
    # They were bare names, so every fresh install could bring a different release.
    dev = requirements(REPO / "requirements-dev.txt")
    pins = {canonicalize_name(r.name): str(r.specifier) for r in dev}
    assert pins["pytest-timeout"].startswith("==") and pins["types-redis"].startswith("==")


@pytest.mark.parametrize(
    "path", [*LOCKS.values(), CHROMA_LOCK], ids=lambda p: str(p.relative_to(REPO))
)
def test_every_locked_package_has_an_exact_version_and_a_sha256(path: Path) -> None:
    text = path.read_text()
    pins = [line for line in text.splitlines() if re.match(r"^[A-Za-z0-9]", line)]
    entries = read_lock(path)
    assert len(entries) == len(pins) > 0  # every top-level line is a `name==version` entry
    for entry in entries.values():
        assert entry.hashes, f"{entry.name} has no hash in {path.name}"
    assert not re.search(r"^\s*(-e|--editable|git\+|https?://)", text, re.MULTILINE)


def test_the_dev_lock_installs_exactly_the_service_lock() -> None:
    service, dev = read_lock(LOCKS["requirements.txt"]), read_lock(LOCKS["requirements-dev.txt"])
    assert service.keys() <= dev.keys()
    for name, entry in service.items():
        assert (dev[name].version, sorted(dev[name].hashes)) == (
            entry.version,
            sorted(entry.hashes),
        ), name


def test_torch_is_locked_as_the_cpu_build_with_everything_it_needs() -> None:
    entries = read_lock(LOCKS["requirements.txt"])
    assert entries["torch"].version.endswith("+cpu")  # never the multi-GB CUDA build
    step = {e.name for e in with_dependencies(entries, ["torch"])}
    assert {"torch", "sympy", "mpmath", "filelock", "jinja2", "markupsafe"} <= step
    assert not any(name.startswith("nvidia") for name in entries)


def test_the_chroma_image_runs_the_clients_chromadb_from_the_dev_lock() -> None:
    chroma, dev = read_lock(CHROMA_LOCK), read_lock(LOCKS["requirements-dev.txt"])
    service = read_lock(LOCKS["requirements.txt"])
    assert chroma["chromadb"].version == service["chromadb"].version
    assert {
        "fastapi",
        "uvicorn",
        "uvloop",
        "opentelemetry-instrumentation-fastapi",
    } <= chroma.keys()
    for name, entry in chroma.items():
        assert (entry.version, entry.hashes) == (dev[name].version, dev[name].hashes), name


def _pip_installs(dockerfile: Path) -> list[str]:
    return [
        command
        for i in instructions(dockerfile)
        if i.keyword == "RUN"
        for command in re.split(r"&&|;", i.arguments)
        if re.search(r"\bpip install\b", command)
    ]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_pip_install_in_an_image_checks_hashes(dockerfile: Path) -> None:
    for command in _pip_installs(dockerfile):
        assert "--require-hashes" in command, f"{dockerfile.name}: {command.strip()}"


def test_install_script_installs_only_from_hashed_locks() -> None:
    script = (REPO / "scripts" / "install.sh").read_text()
    installs = [line for line in script.splitlines() if re.search(r"\$pip install", line)]
    assert installs
    for line in installs:
        assert "--require-hashes" in line, line


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_base_image_is_pinned_by_digest(dockerfile: Path) -> None:
    stages: set[str] = set()
    for instruction in instructions(dockerfile):  # ARG defaults substituted
        if instruction.keyword != "FROM":
            continue
        image, *alias = instruction.arguments.split()
        if alias:
            stages.add(alias[-1].lower())
        if image == "scratch" or image.lower() in stages:
            continue
        assert PINNED_IMAGE.match(image), f"{dockerfile.relative_to(REPO)}: FROM {image}"


def _compose_images() -> list[str]:
    """Every image reference compose would use by default: `image:` of services that are not
    built here, and each build's BASE_IMAGE."""
    found = []
    for line in COMPOSE.read_text().splitlines():
        stripped = line.split("#", 1)[0].strip()
        match = re.match(r"^(image|BASE_IMAGE):\s*(\S+)$", stripped)
        if match:
            value = match.group(2)
            default = re.fullmatch(r"\$\{\w+:-(.+)\}", value)
            found.append(default.group(1) if default else value)
    return found


def test_every_image_compose_pulls_is_pinned_by_digest() -> None:
    built_here = {"rag-service:latest", "rag-chroma:1.5.9", "rag-proxy:latest"}
    built_here |= {"rag-prometheus:latest"}
    pulled = [image for image in _compose_images() if image not in built_here]
    assert any(image.startswith("ollama/ollama:") for image in pulled)
    assert any(image.startswith("redis:") for image in pulled)
    for image in pulled:
        assert PINNED_IMAGE.match(image), image


def test_every_build_in_compose_uses_the_dockerfiles_pinned_base() -> None:
    dockerfile_default = re.search(
        r"^ARG BASE_IMAGE=(\S+)$", (REPO / "Dockerfile").read_text(), re.M
    )
    assert dockerfile_default is not None
    bases = set(re.findall(r"BASE_IMAGE: \$\{BASE_IMAGE:-(\S+)\}", COMPOSE.read_text()))
    assert bases == {dockerfile_default.group(1)}
    for dockerfile in DOCKERFILES:  # one base for all, so one place to move it forward
        assert f"ARG BASE_IMAGE={dockerfile_default.group(1)}\n" in dockerfile.read_text()


@pytest.mark.parametrize("python", ["3.11.0", "3.11.2", "3.11.14"])
def test_the_locks_hold_every_dependency_on_any_cpython_311(python: str) -> None:
    # Resolved on one 3.11 (this machine's), installed on another: Debian bookworm's 3.11.2 in
    # the offline base image needs async-timeout for redis (python_full_version < "3.11.3").
    # Read from the installed packages' own metadata (this venv is installed from the lock).
    environment = {**default_environment(), "python_full_version": python, "extra": ""}
    for path in LOCKS.values():
        entries = read_lock(path)
        checked = 0
        for entry in entries.values():
            try:
                installed = metadata.distribution(entry.name)
            except metadata.PackageNotFoundError:
                continue
            if installed.version != entry.version:
                continue
            checked += 1
            for line in installed.requires or []:
                needed = Requirement(line)
                if needed.marker is None or needed.marker.evaluate(environment):
                    assert canonicalize_name(needed.name) in entries, (
                        f"{entry.name} needs {needed} on CPython {python}; not in {path.name}"
                    )
        assert checked >= 0.9 * len(entries), f"this venv is not installed from {path.name}"
