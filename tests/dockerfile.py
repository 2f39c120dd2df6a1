"""Just enough of a Dockerfile reader to check what its `COPY` lines take from the context."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

_ARG_REF = re.compile(r"\$\{(\w+)\}|\$(\w+)")


@dataclass(frozen=True)
class Instruction:
    """One instruction of a Dockerfile, continuation lines joined, in its build stage."""

    stage: int  # 0-based index of the FROM it belongs to
    keyword: str  # upper case: FROM, COPY, RUN, ...
    arguments: str
    workdir: str  # the WORKDIR in force when it runs ("/" when none was set)


@dataclass(frozen=True)
class Copy:
    """A `COPY` from the build context (never `--from=`): sources and destination, args expanded."""

    sources: tuple[str, ...]
    destination: str


def instructions(dockerfile: Path) -> list[Instruction]:
    """Every instruction, `ARG` defaults substituted as in a build without --build-arg."""
    joined: list[str] = []
    pending = ""
    for raw in dockerfile.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    found: list[Instruction] = []
    args: dict[str, str] = {}
    stage, workdir = -1, "/"
    for line in joined:
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        rest = rest.strip()
        if keyword == "ARG":
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip()
        rest = _ARG_REF.sub(lambda m: args.get(m.group(1) or m.group(2), m.group(0)), rest)
        if keyword == "FROM":
            stage, workdir = stage + 1, "/"
        elif keyword == "WORKDIR":
            workdir = rest if rest.startswith("/") else f"{workdir.rstrip('/')}/{rest}"
        found.append(Instruction(stage, keyword, rest, workdir))
    return found


def context_copy(instruction: Instruction) -> Copy | None:
    """The sources and destination of a `COPY` from the context; None for `--from=` copies."""
    words = shlex.split(instruction.arguments)
    if any(word.startswith("--from=") for word in words):
        return None
    paths = [word for word in words if not word.startswith("--")]
    destination = paths[-1]
    if not destination.startswith("/"):
        destination = f"{instruction.workdir.rstrip('/')}/{destination}"
    return Copy(tuple(paths[:-1]), destination)
