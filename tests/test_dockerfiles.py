"""The Docker builds, checked in seconds without a Docker engine (`make docker-check` is opt-in).

The image copies a few files before the model-download layer so that a code change does not
redo the models. When one of those files gains an import that the layer does not copy, the
build fails at `scripts/download_models.py`; these tests rebuild that layer in a temporary
folder and run the script there, so `make test` fails first.
"""

from __future__ import annotations

import ast
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.dockerfile import Copy, context_copy, instructions

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
IMAGE_DOCKERFILE = ROOT / "Dockerfile"
MODEL_SCRIPT = "download_models.py"


def _early_copies(dockerfile: Path) -> list[Copy]:
    """The context copies of the final stage made before the RUN of the model-download script."""
    steps = instructions(dockerfile)
    final = max(step.stage for step in steps)
    copies: list[Copy] = []
    for step in steps:
        if step.stage != final:
            continue
        if step.keyword == "RUN" and MODEL_SCRIPT in step.arguments:
            return copies
        if step.keyword == "COPY" and (copy := context_copy(step)) is not None:
            copies.append(copy)
    raise AssertionError(f"no RUN of {MODEL_SCRIPT} in {dockerfile}")


def _materialise(copies: list[Copy], context: Path, image_root: Path) -> None:
    """Lay the copied files out under `image_root` where the image would have them."""
    for copy in copies:
        target = image_root / copy.destination.lstrip("/")
        into_folder = copy.destination.endswith("/") or len(copy.sources) > 1
        for source in copy.sources:
            path = context / source
            if path.is_dir():
                shutil.copytree(path, target, dirs_exist_ok=True)
            else:
                place = target / path.name if into_folder else target
                place.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, place)


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of a module except those under `if TYPE_CHECKING:`, which never run."""
    found: list[ast.AST] = []
    pending = [tree]
    while pending:
        node = pending.pop()
        found.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return found


def _app_imports(source: Path) -> set[str]:
    """Every `app.*` module a file imports when it runs, at module level or inside functions."""
    names: set[str] = set()
    for node in _runtime_nodes(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in names if name == "app" or name.startswith("app.")}


def _module_file(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def missing_imports(copied_root: Path, source_root: Path) -> dict[str, str]:
    """`app` modules that copied files import but the copy lacks -> the file that imports them.

    A name that is not a module in the source tree (`from app.config import Settings` names a
    class) is not a file to copy, so only names that exist as modules in the source count.
    """
    missing: dict[str, str] = {}
    for path in sorted(copied_root.rglob("*.py")):
        for module in _app_imports(path):
            if _module_file(source_root, module) is None:
                continue
            if _module_file(copied_root, module) is None:
                missing[module] = str(path.relative_to(copied_root))
    return missing


def test_model_download_layer_holds_everything_its_script_imports(tmp_path: Path) -> None:
    _materialise(_early_copies(IMAGE_DOCKERFILE), ROOT, tmp_path)
    app_dir = tmp_path / "app"
    assert (app_dir / "scripts" / MODEL_SCRIPT).is_file(), "the layer must copy the script"

    assert missing_imports(app_dir, ROOT) == {}

    # Run it as the build does, isolated from this checkout: -I ignores PYTHONPATH and the
    # current folder, so `app` can only come from the copied files.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    run = subprocess.run(
        [sys.executable, "-I", f"scripts/{MODEL_SCRIPT}", "--help"],
        cwd=app_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "--env-file" in run.stdout


def test_the_closure_check_notices_a_file_the_layer_forgot(tmp_path: Path) -> None:
    """The check above would have caught the image that could not start because
    app/request_limits.py was not copied."""
    _materialise(_early_copies(IMAGE_DOCKERFILE), ROOT, tmp_path)
    (tmp_path / "app" / "app" / "request_limits.py").unlink()

    assert set(missing_imports(tmp_path / "app", ROOT)) == {"app.request_limits"}


def _dockerfiles() -> list[tuple[Path, Path]]:
    """(Dockerfile, its build context): the image at the root, the others in their folders."""
    found = [(IMAGE_DOCKERFILE, ROOT)]
    for path in sorted(ROOT.glob("docker/**/Dockerfile")):
        found.append((path, path.parent))
    return found


def _ignored(context: Path) -> set[str]:
    """The paths a context's .dockerignore leaves out (only literal paths are used here)."""
    ignore_file = context / ".dockerignore"
    if not ignore_file.is_file():
        return set()
    lines = (line.strip() for line in ignore_file.read_text().splitlines())
    return {line.rstrip("/") for line in lines if line and not line.startswith("#")}


@pytest.mark.parametrize(
    ("dockerfile", "context"),
    [pytest.param(*pair, id=str(pair[0].relative_to(ROOT))) for pair in _dockerfiles()],
)
def test_every_copy_source_exists(dockerfile: Path, context: Path) -> None:
    ignored = _ignored(context)
    absent: list[str] = []
    for step in instructions(dockerfile):
        if step.keyword not in {"COPY", "ADD"} or (copy := context_copy(step)) is None:
            continue
        for source in copy.sources:
            matches = glob.glob(str(context / source))
            if not matches or source.rstrip("/") in ignored:
                absent.append(source)
    assert absent == [], f"{dockerfile.relative_to(ROOT)} copies what the context lacks"
