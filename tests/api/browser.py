"""Headless Chromium from Debian's packages, driven by Playwright (its own browser download
cannot work offline). A missing browser fails the test (tests/availability.py)."""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.availability import unavailable

REPO_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INSTALL_HINT = (
    "install it with `apt-get install -y chromium chromium-driver` (scripts/install.sh does so "
    "for `dev` when run as root) or point RAG_TEST_CHROMIUM at a Chromium binary"
)


def chromium_path() -> str:
    """The Chromium to drive; fails (or skips, when asked to) if there is none."""
    wanted = os.environ.get("RAG_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if Path(wanted).is_file() and os.access(wanted, os.X_OK):
        return wanted
    unavailable(f"no Chromium at {wanted}; {INSTALL_HINT}")


def artifacts_dir() -> Path:
    """Where screenshots go: RAG_TEST_ARTIFACTS or tmp/artifacts/web in the repository."""
    folder = Path(os.environ.get("RAG_TEST_ARTIFACTS", REPO_ROOT / "tmp" / "artifacts" / "web"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def launched_chromium(*, downloads: bool = False) -> Iterator[object]:
    """A Playwright Chromium browser context with a fresh profile directory; with `downloads`,
    files the page saves (an export) can be read through `page.expect_download()`."""
    executable = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # a broken dev install must not look like a passing suite
        pytest.fail("playwright is not installed; run `make test` (installs requirements-dev)")
    with (
        tempfile.TemporaryDirectory(prefix="rag-chromium-") as profile,
        sync_playwright() as playwright,
    ):
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=executable,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 900},
            accept_downloads=downloads,
        )
        try:
            yield context
        finally:
            context.close()


def screenshot(page: Any, name: str) -> Path:
    """A full-page screenshot in artifacts_dir(), to look at; its path."""
    path = artifacts_dir() / name
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


# Drops files on an element the way a person's drag does (the element need not be on screen).
DROP_FILES = """({ files, target }) => {
  const transfer = new DataTransfer();
  for (const f of files) {
    const bytes = Uint8Array.from(atob(f.data), (c) => c.charCodeAt(0));
    transfer.items.add(new File([bytes], f.name, { type: f.type }));
  }
  const where = document.querySelector(target);
  let opened = true;
  for (const type of ["dragenter", "dragover", "drop"]) {
    const init = { dataTransfer: transfer, bubbles: true, cancelable: true };
    opened = where.dispatchEvent(new DragEvent(type, init));
  }
  return !opened;
}"""


def answer_stream_rewritten(rewrite: str) -> str:
    """A page script that hands the page the real server's answer stream (`POST /query/stream`)
    changed by `rewrite`: the body of an async function of `response` (the server's) that
    returns the Response the page reads instead. Every other request is left alone."""
    wrapper = """(() => {
  const realFetch = window.fetch;
  window.fetch = async (...args) => {
    const response = await realFetch(...args);
    const url = typeof args[0] === "string" ? args[0] : args[0].url;
    if (!url.includes("/query/stream") || !response.ok) return response;
    return (async (response) => { REWRITE })(response);
  };
})();"""
    return wrapper.replace("REWRITE", rewrite)


def drop_files(page: Any, files: list[tuple[str, bytes, str]], target: str = "#drop-zone") -> bool:
    """Drop (name, bytes, MIME type) files on the element `target` selects (the drop zone);
    whether the page took the drop (else the browser would leave the page to open the file)."""
    payload = [
        {"name": name, "data": base64.b64encode(data).decode(), "type": kind}
        for name, data, kind in files
    ]
    taken: bool = page.evaluate(DROP_FILES, {"files": payload, "target": target})
    return taken


# Controls without an accessible name, and visible text under WCAG AA contrast (4.5:1) against
# its nearest opaque background: {"unnamed": [...], "low": [...]}, both empty when all is well.
A11Y_AUDIT = """() => {
  const visible = (e) =>
    e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden";
  const named = (e) => (e.labels && e.labels.length) || e.getAttribute("aria-label") ||
    e.getAttribute("aria-labelledby") || e.textContent.trim();
  const unnamed = [...document.querySelectorAll("input, textarea, button, select, a[href]")]
    .filter((e) => !named(e)).map((e) => e.outerHTML.slice(0, 80));
  const channel = (c) => {
    c /= 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  const rgb = (text) => text.match(/[\\d.]+/g).map(Number);
  const luminance = ([r, g, b]) => 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
  const background = (e) => {
    for (let node = e; node; node = node.parentElement) {
      const colour = rgb(getComputedStyle(node).backgroundColor);
      if (colour.length < 4 || colour[3] > 0) return colour;
    }
    return [255, 255, 255];
  };
  const low = [];
  for (const e of document.querySelectorAll("body *")) {
    const own = [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || !visible(e)) continue;
    const fg = luminance(rgb(getComputedStyle(e).color));
    const bg = luminance(background(e));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    const what = `${e.tagName}.${e.className} "${e.textContent.trim().slice(0, 30)}"`;
    if (ratio < 4.5) low.push(`${what} ${ratio.toFixed(2)}`);
  }
  return { unnamed, low };
}"""


PHONE = {"width": 360, "height": 740}
SMALLEST_PHONE = {"width": 320, "height": 568}  # the narrowest phones still in use
# What runs past the sides of the screen or of its card (or dialog): the page itself, then each
# element that no container of its own brings into view (it scrolls) or cuts short on purpose
# (a name that ends in an ellipsis). Empty when everything fits.
PAST_THE_EDGES = """() => {
  const width = document.documentElement.clientWidth;
  const past = [];
  const pageWidth = document.documentElement.scrollWidth;
  if (pageWidth > width) past.push(`the page is ${pageWidth} px wide`);
  const holds = (e) => {
    const style = getComputedStyle(e);
    return ["auto", "scroll"].includes(style.overflowX) || style.textOverflow === "ellipsis";
  };
  for (const e of document.querySelectorAll("body *")) {
    if (!e.getClientRects().length || e.closest(".visually-hidden, .skip-link")) continue;
    let parent = e.parentElement;
    while (parent && parent !== document.body && !holds(parent)) parent = parent.parentElement;
    if (parent && parent !== document.body) continue;
    const box = e.getBoundingClientRect();
    const card = e.parentElement.closest(".card, dialog");
    const edges = card ? card.getBoundingClientRect() : { left: 0, right: width };
    const left = Math.max(edges.left, 0);
    const right = Math.min(edges.right, width);
    if (box.left < left - 0.5 || box.right > right + 0.5) {
      const text = e.textContent.trim().slice(0, 30);
      past.push(`${e.tagName} "${text}" ${Math.round(box.left)}..${Math.round(box.right)}`);
    }
  }
  return past;
}"""


def brightness(context: Any, png: bytes, x: int, y: int) -> float:
    """The mean of red, green and blue (0..255) at (x, y) of a PNG picture, read by a blank tab
    of the browser `context` (no page's content policy stands in its way)."""
    blank = context.new_page()
    try:
        value: float = blank.evaluate(
            """async ({ data, x, y }) => {
              const picture = await createImageBitmap(
                await (await fetch(`data:image/png;base64,${data}`)).blob());
              const canvas = new OffscreenCanvas(picture.width, picture.height);
              const drawn = canvas.getContext("2d");
              drawn.drawImage(picture, 0, 0);
              const [r, g, b] = drawn.getImageData(x, y, 1, 1).data;
              return (r + g + b) / 3;
            }""",
            {"data": base64.b64encode(png).decode(), "x": x, "y": y},
        )
    finally:
        blank.close()
    return value


def sign_in_with_form(
    page: Any, url: str, username: str, password: str, organisation: str = ""
) -> None:
    """Open the app at `url`, sign in through the form by its visible labels (typing the
    `organisation` when given), and wait until it greets `username`."""
    from playwright.sync_api import expect

    page.goto(f"{url}/")
    if organisation:
        page.get_by_label("Organisation", exact=True).fill(organisation)
    page.get_by_label("User name", exact=True).fill(username)
    page.get_by_label("Password", exact=True).fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("Signed in as")).to_have_text(f"Signed in as {username}")
