"""Check the documentation's links and the README's quick start (run by `make lint`).

- Every relative link in README.md, ARCHITECTURE.md, docs/*.md, docs/log/*.md and
  bench/README.md points at a file that exists and, when it names an `#anchor`, at a heading of
  that file.
- Every `make TARGET` command in the README's quick start is a target of the Makefile.
- No document points at an issue tracker the repository does not hold ("#37", "issue 38"): it
  says what the thing is instead.
- No document names a folder of the machine it was written on (`/work/...`, `/home/...`,
  `/root/...`, `/Users/...`), code blocks included: paths are relative to the checkout or named
  by their setting.

Prints each problem and exits 1 when there is one.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = ["README.md", "ARCHITECTURE.md", "bench/README.md", "docs/*.md", "docs/log/*.md"]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
EXTERNAL = ("http://", "https://", "mailto:")
# "#37" standing alone (not a heading's marks, an anchor, `&#39;` or inside a word), or "issue 38".
TRACKER_REFERENCE = re.compile(r"(?<![\w/&#(])#\d{1,3}(?![\w-])|\bissues? ?#?\d+\b", re.IGNORECASE)

# A home or workplace folder at the start of a path (not `/home` inside a longer name).
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|home|root|Users)/[\w.-]+")


def markdown_files(root: Path = ROOT) -> list[Path]:
    """The checked documents that exist, in a stable order."""
    found: list[Path] = []
    for pattern in DOCUMENTS:
        found.extend(sorted(root.glob(pattern)))
    return found


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a Markdown file's headings define (repeats get -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def link_problems(path: Path, root: Path = ROOT) -> list[str]:
    """Broken relative links (missing file or anchor) of one Markdown file."""
    problems = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        line = re.sub(r"`[^`]*`", "", line)  # links inside inline code are not links
        for match in LINK.finditer(line):
            target = match.group(1) or match.group(2)
            if target.startswith(EXTERNAL):
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(root)}:{number}: {target}"
            if not linked.exists():
                problems.append(f"{where}: no such file")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                problems.append(f"{where}: no heading with anchor #{anchor}")
    return problems


def tracker_references(path: Path, root: Path = ROOT) -> list[str]:
    """Lines of one Markdown file that name an issue by its number (inline code aside)."""
    problems = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        for match in TRACKER_REFERENCE.finditer(re.sub(r"`[^`]*`", "", line)):
            where = f"{path.relative_to(root)}:{number}"
            problems.append(
                f"{where}: names an issue by number ({match.group(0)!r}); say what it is"
            )
    return problems


def machine_paths(path: Path, root: Path = ROOT) -> list[str]:
    """Lines of one Markdown file, code included, that name a folder of the writer's machine."""
    problems = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        for match in MACHINE_PATH.finditer(line):
            where = f"{path.relative_to(root)}:{number}"
            problems.append(
                f"{where}: names a folder of one machine ({match.group(0)!r}); "
                "make it relative to the checkout or name its setting"
            )
    return problems


def quick_start_commands(readme: Path) -> list[str]:
    """The `make` targets named in the code blocks of the README's "Quick start" section."""
    targets, in_section, fenced = [], False, False
    for line in readme.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        heading = HEADING.match(line) if not fenced else None
        if heading:
            in_section = heading.group(2).strip().lower() == "quick start"
            continue
        if in_section and fenced:
            command = re.match(r"\s*make\s+([\w.-]+)", line)
            if command:
                targets.append(command.group(1))
    return targets


def makefile_targets(makefile: Path) -> set[str]:
    """Targets a Makefile defines (rules at the start of a line)."""
    names: set[str] = set()
    for line in makefile.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^([\w.-]+(?:\s+[\w.-]+)*)\s*:(?!=)", line)
        if match:
            names.update(match.group(1).split())
    return names


def quick_start_problems(root: Path = ROOT) -> list[str]:
    """Quick-start commands that are not Makefile targets (or a quick start with none)."""
    commands = quick_start_commands(root / "README.md")
    if not commands:
        return ["README.md: the Quick start section names no `make` command"]
    known = makefile_targets(root / "Makefile")
    return [
        f"README.md quick start: `make {c}` is not a Makefile target"
        for c in commands
        if c not in known
    ]


def main() -> int:
    problems = quick_start_problems()
    for path in markdown_files():
        problems.extend(link_problems(path))
        problems.extend(tracker_references(path))
        problems.extend(machine_paths(path))
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
