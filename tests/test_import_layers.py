"""The layer rules of ARCHITECTURE.md, checked on the source: data flows one way, only the entry
points import the composition root, and no module imports itself back through others
(function-level imports count: they are circles deferred; TYPE_CHECKING ones do not run)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

APP = Path(__file__).resolve().parents[1] / "app"

LAYERS = (
    "app.api",
    "app.container",
    "app.job_runners",
    "app.services",
    "app.jobs",
    "app.ingestion",
)
LAYERS += ("app.retrieval", "app.generation", "app.providers", "app.storage", "app.rendering")
LAYERS += ("app.text",)
# What sits below everything: settings, errors, shared records, limits, timing, the answer cache
# key's settings, passwords and tokens, logging, child-process limits, the metrics and trace
# recorders every layer calls, and the wakeable polling thread.
FOUNDATION = ("app.config", "app.settings_docs", "app.errors", "app.domain", "app.request_limits")
FOUNDATION += ("app.timing", "app.answer_shape", "app.security", "app.observability")
FOUNDATION += ("app.child_process", "app.metrics", "app.tracing", "app.memory")
FOUNDATION += ("app.ranking_metrics", "app.wakeable_thread")

# module or package -> what it must never import (the most specific entry applies), at module
# level, in a function or under TYPE_CHECKING (a type-only import still couples the layers).
# The storage and providers rules name the layer design's three packages first; the rest follow the
# picture in ARCHITECTURE.md. Deliberately allowed, because the current design is sound: retrieval
# -> providers (the retriever embeds the query and reranks with them), retrieval -> storage (a
# store is below it), generation -> providers (it calls the LLM), services -> all below them.
JOBS = ("app.jobs", "app.job_runners")
ABOVE_STORAGE = ("app.services", "app.api", "app.ingestion", "app.rendering", *JOBS)
BELOW = ("app.providers", "app.storage", *JOBS)
SERVICES = APP / "services"
USE_CASES = tuple(
    f"app.services.{path.stem}" for path in sorted(SERVICES.glob("*.py")) if path.stem != "__init__"
)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "app.storage": ("app.providers", "app.generation", "app.retrieval", *ABOVE_STORAGE),
    "app.providers": ("app.generation", "app.retrieval", "app.storage", *ABOVE_STORAGE),
    "app.text": LAYERS[:-1],  # used by every layer, so it uses none
    "app.retrieval": ("app.generation", "app.services", "app.api", "app.ingestion", *JOBS),
    # Generation gets passages and an LLM; the tokenizer it needs lives in app.text.
    "app.generation": ("app.retrieval", "app.services", "app.api", "app.storage", *JOBS),
    # Ingestion only parses and chunks; the indexing service embeds and stores the chunks.
    "app.ingestion": ("app.services", "app.api", "app.generation", "app.retrieval", *BELOW),
    "app.rendering": ("app.services", "app.api", "app.storage", *JOBS),
    # The running of jobs sits above the services (it calls the indexing service);
    # the job table and the queue sit below them (the uploads service queues uploads there).
    "app.job_runners": ("app.api",),
    "app.services": ("app.api", "app.job_runners"),
    # The building blocks of the use cases: a route calls a use case, a block never does.
    "app.services.blocks": ("app.api", "app.job_runners", *USE_CASES),
    "app.jobs": ("app.services", "app.api", "app.job_runners"),
    **{module: LAYERS for module in FOUNDATION},
    # It builds every component, so it imports (lazily) all but the API it serves.
    "app.container": ("app.api",),
}
# The composition root builds everything; only the entry points may import it, so that services
# and jobs receive their collaborators instead of reaching back into it.
COMPOSITION_ROOT = "app.container"
ENTRY_POINTS = ("app.api", "app.main", "app.cli", "app.worker", "app.serve")


def module_name(path: Path) -> str:
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes under `if TYPE_CHECKING:` (never executed at run time)."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in {
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        }:
            guarded |= {id(inner) for stmt in node.body for inner in ast.walk(stmt)}
    return guarded


def imported_modules(path: Path) -> Iterator[tuple[str, bool]]:
    """Every app module this file imports, at module level or inside a function, and whether
    the import runs (False: only under TYPE_CHECKING)."""
    package = (
        module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(path)
    )
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = _type_checking_only(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        runs = id(node) not in type_only
        yield from ((name, runs) for name in names if name == "app" or name.startswith("app."))


def import_graph(*, runtime_only: bool = False) -> dict[str, set[str]]:
    """module -> the app modules it imports (with `runtime_only`, not those under TYPE_CHECKING)."""
    modules = {module_name(p): p for p in APP.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {
            target
            for target, runs in imported_modules(path)
            if target in modules and target != name and (runs or not runtime_only)
        }
    return graph


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def banned_for(module: str) -> tuple[str, ...]:
    """The rule of the most specific FORBIDDEN entry that covers `module`."""
    covering = [layer for layer in FORBIDDEN if _within(module, layer)]
    return FORBIDDEN[max(covering, key=len)] if covering else ()


def test_layers_import_only_downwards() -> None:
    graph = import_graph()
    breaches = sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        for target in targets
        if any(_within(target, banned) for banned in banned_for(module))
    )
    assert breaches == []


def test_only_entry_points_import_the_composition_root() -> None:
    importers = sorted(
        module
        for module, targets in import_graph().items()
        if COMPOSITION_ROOT in targets and not any(_within(module, e) for e in ENTRY_POINTS)
    )
    assert importers == []


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components with more than one module (each one an import circle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_no_import_circles() -> None:
    # Not even through imports under TYPE_CHECKING, which never run but still tie two modules
    # together for whoever changes them.
    assert strongly_connected(import_graph(runtime_only=True)) == []
    assert strongly_connected(import_graph()) == []


def test_the_checks_see_function_level_and_type_only_imports() -> None:
    graph, runtime = import_graph(), import_graph(runtime_only=True)
    # Imported inside a function: counts for both checks.
    assert "app.providers.embeddings" in runtime["app.container"]
    # Imported only under TYPE_CHECKING: a layer edge, but no run-time edge.
    assert "app.config" in graph["app.jobs.store"]
    assert "app.config" not in runtime["app.jobs.store"]


def test_use_cases_and_building_blocks_are_apart() -> None:
    # The rule above is only as good as the list it is built from.
    assert "app.services.answer" in USE_CASES
    assert not any(_within(name, "app.services.blocks") for name in USE_CASES)
    assert "app.services.blocks.corpus" in import_graph()["app.services.indexing"]


# The checkout's top-level packages: the service, the testing kit that starts it and builds its
# inputs, what measures it, and the tests (which may import all of them). The `rag` command line
# (client/, its package `rag_client`) is installed on its own: it imports none of them, and the
# service does not import it.
TOP_LEVEL_FORBIDDEN = {
    "app": ("testkit", "tests", "bench", "eval", "rag_client"),
    "testkit": ("tests", "bench", "eval", "rag_client"),
    "client": ("app", "testkit", "tests", "bench", "eval"),
    "bench": ("tests",),
    "eval": ("tests",),
}


def _top_level_imports(path: Path) -> Iterator[str]:
    """The first component of every absolute import in the file (any depth, any guard)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module.split(".")[0]


def test_top_level_packages_import_only_downwards() -> None:
    root = APP.parent
    breaches = sorted(
        f"{path.relative_to(root)} imports {name}"
        for package, banned in TOP_LEVEL_FORBIDDEN.items()
        for path in (root / package).rglob("*.py")
        for name in _top_level_imports(path)
        if name in banned
    )
    assert breaches == []


def top_level_parts() -> list[str]:
    """Every module and package directly under app/ (app/web holds only static files)."""
    parts = [p.stem for p in APP.glob("*.py") if p.name != "__init__.py"]
    parts += [p.name for p in APP.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    return sorted(parts)


def test_every_module_of_app_has_a_layer() -> None:
    placed = (*LAYERS, *FOUNDATION, *ENTRY_POINTS)
    unplaced = [
        f"app.{part}"
        for part in top_level_parts()
        if not any(_within(f"app.{part}", layer) for layer in placed)
    ]
    assert unplaced == [], "add them to a layer here and to ARCHITECTURE.md's picture"


def test_architecture_picture_names_every_module_of_app() -> None:
    text = (APP.parent / "ARCHITECTURE.md").read_text(encoding="utf-8")
    picture = text.split("## Layers", 1)[1].split("```")[1]
    missing = [
        part
        for part in top_level_parts()
        if f"app/{part}/" not in picture and f"{part}.py" not in picture
    ]
    assert missing == []
