"""Print the entries of a hash lock (scripts/lock.sh) for some packages and what they need.

    python scripts/lock_entries.py requirements.lock torch        # torch and its dependencies
    python scripts/lock_entries.py requirements.lock pip --alone  # only pip
    python scripts/lock_entries.py requirements.lock llama-cpp-python --dependencies-only

scripts/install.sh and the Dockerfile install torch and llama-cpp-python in steps of their own
before the rest; `pip install --require-hashes` needs every package of a step pinned and hashed,
so a step gets its package's entries with all of their dependencies, read from the lock's
`# via` notes. Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def canonical(name: str) -> str:
    """A distribution name as pip compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class Entry:
    """One pinned package of the lock: its lines (pin and hashes) and who needs it."""

    name: str
    version: str
    lines: list[str] = field(default_factory=list)
    needed_by: set[str] = field(default_factory=set)

    @property
    def hashes(self) -> list[str]:
        """The `sha256:...` values the lock accepts for this package."""
        return re.findall(r"--hash=(sha256:[0-9a-f]{64})", " ".join(self.lines))


def read_lock(path: Path) -> dict[str, Entry]:
    """Every entry of a pip-compile lock (split annotation style), by canonical name."""
    entries: dict[str, Entry] = {}
    current: Entry | None = None
    in_via = False
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.rstrip()
        pin = _PIN.match(line)
        if pin:
            current = Entry(canonical(pin.group(1)), pin.group(2), [line])
            entries[current.name] = current
            in_via = False
        elif current is not None and line.startswith("    --hash="):
            current.lines.append(line)
        elif current is not None and line.strip().startswith("# via"):
            rest = line.strip().removeprefix("# via").strip()
            in_via = not rest
            if rest:
                current.needed_by.add(canonical(rest))
        elif current is not None and in_via and line.startswith("    #   "):
            current.needed_by.add(canonical(line.strip().removeprefix("#").strip()))
        elif not line.startswith("    "):
            current, in_via = None, False
    return entries


def with_dependencies(entries: dict[str, Entry], roots: list[str]) -> list[Entry]:
    """The roots and every entry they need, directly or not, in the lock's order."""
    chosen = {canonical(root) for root in roots}
    missing = chosen - entries.keys()
    if missing:
        raise SystemExit(f"not in the lock: {', '.join(sorted(missing))}")
    grew = True
    while grew:
        grew = False
        for entry in entries.values():
            if entry.name not in chosen and entry.needed_by & chosen:
                chosen.add(entry.name)
                grew = True
    return [entry for entry in entries.values() if entry.name in chosen]


def main(argv: list[str] | None = None) -> int:
    """Print the chosen entries as a requirements file for `pip install --require-hashes`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lock", type=Path)
    parser.add_argument("names", nargs="+")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--alone", action="store_true", help="without their dependencies")
    only.add_argument(
        "--dependencies-only", action="store_true", help="what they need, not themselves"
    )
    args = parser.parse_args(argv)
    entries = read_lock(args.lock)
    if args.dependencies_only:
        roots = {canonical(name) for name in args.names}
        chosen = [e for e in with_dependencies(entries, args.names) if e.name not in roots]
    elif args.alone:
        chosen = [entries[canonical(n)] for n in args.names if canonical(n) in entries]
        if len(chosen) != len(args.names):
            raise SystemExit(f"not in the lock: {' '.join(args.names)}")
    else:
        chosen = with_dependencies(entries, args.names)
    for entry in chosen:
        sys.stdout.write(" \\\n".join(line.rstrip(" \\") for line in entry.lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
