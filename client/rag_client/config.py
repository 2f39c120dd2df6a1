"""Where `rag` finds the service and its key: flags, then the environment, then the config
file `rag login` wrote (mode 0600, in the user's config directory)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_client.errors import UsageError

DEFAULT_URL = "http://127.0.0.1:8000"


def config_path(env: Mapping[str, str] = os.environ) -> Path:
    """The config file: RAG_CONFIG_FILE, else `rag/config.json` in the user's config directory
    (XDG_CONFIG_HOME or ~/.config; %APPDATA% on Windows; Application Support on macOS)."""
    given = env.get("RAG_CONFIG_FILE")
    if given:
        return Path(given)
    if sys.platform == "win32" and env.get("APPDATA"):
        base = Path(env["APPDATA"])
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "rag" / "config.json"


@dataclass(frozen=True)
class Connection:
    """The service to talk to and the key to present (None: none configured)."""

    url: str
    api_key: str | None


def read_config(path: Path) -> dict[str, Any]:
    """The saved settings ({} when there is no file); UsageError when it is not JSON."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        found = json.loads(text)
    except ValueError:
        raise UsageError(f"{path} is not JSON; run `rag login` again") from None
    return found if isinstance(found, dict) else {}


def resolve(
    url: str | None, api_key: str | None, env: Mapping[str, str] = os.environ
) -> Connection:
    """Each setting from the first place that has it: flag, environment, config file."""
    saved = read_config(config_path(env))
    chosen_url = url or env.get("RAG_URL") or saved.get("url") or DEFAULT_URL
    chosen_key = api_key or env.get("RAG_API_KEY") or saved.get("api_key") or None
    return Connection(str(chosen_url).rstrip("/"), chosen_key)


def save_config(path: Path, url: str, api_key: str) -> None:
    """Write the settings readable by the user alone (0600, in a 0700 directory), replacing
    the file without ever leaving the key readable by others."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)  # left by a write that was interrupted
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump({"url": url, "api_key": api_key}, handle)
    os.chmod(partial, 0o600)
    os.replace(partial, path)
