"""/docs and /redoc come from installed assets (no CDN), and RAG_DOCS_ENABLED switches them."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from tests.api.harness import ApiFactory

pytestmark = pytest.mark.integration

EXTERNAL_URL = re.compile(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.IGNORECASE)


def test_docs_pages_and_their_assets_are_served_locally(api_factory: ApiFactory) -> None:
    api = api_factory(start_workers=False)  # development: docs on by default
    for path, assets in (
        ("/docs", ["swagger-ui-bundle.js", "swagger-ui.css"]),
        ("/redoc", []),
    ):
        page = api.client.get(path)
        assert page.status_code == 200
        assert not EXTERNAL_URL.search(page.text), page.text
        assert "fonts.googleapis" not in page.text and "cdn." not in page.text
        for asset in assets:
            url = f"/docs-assets/{asset}"
            assert url in page.text
            served = api.client.get(url)
            assert served.status_code == 200 and len(served.content) > 100_000
    bundle = api.client.get("/docs-offline/redoc.standalone.js")
    assert "/docs-offline/redoc.standalone.js" in api.client.get("/redoc").text
    assert bundle.status_code == 200 and len(bundle.content) > 500_000
    assert b"cdn.redoc.ly" not in bundle.content


@pytest.mark.parametrize(
    ("overrides", "served"),
    [
        ({"env": "production"}, False),
        ({"env": "production", "docs_enabled": True}, True),
        ({"env": "development", "docs_enabled": False}, False),
    ],
)
def test_docs_follow_the_setting(
    api_factory: ApiFactory, overrides: dict[str, object], served: bool
) -> None:
    api = api_factory(start_workers=False, **overrides)
    for path in ("/docs", "/redoc"):
        response = api.client.get(path)
        assert response.status_code == (200 if served else 404), path
        if not served:
            assert response.json()["error"]["code"] == "not_found"
    assert api.client.get("/openapi.json").status_code == 200  # clients still get the schema


def test_the_web_app_page_and_its_modules_are_served(api_factory: ApiFactory) -> None:
    api = api_factory(start_workers=False)
    page = api.client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert not EXTERNAL_URL.search(page.text)
    for module in re.findall(r'src="(/static/[^"]+)"', page.text):
        assert api.client.get(module).status_code == 200
    script = api.client.get("/static/js/main.js")
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]


def test_under_a_gateway_prefix_every_link_stays_under_it(api_factory: ApiFactory) -> None:
    api = api_factory(start_workers=False)
    prefixed = TestClient(api.app, root_path="/rag")
    page = prefixed.get("/")
    assert page.status_code == 200
    assert '<base href="/rag/">' in page.text
    links = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert links[:4] == ["/rag/", "static/favicon.svg", "static/style.css", "static/js/main.js"]
    # The rest are the skip link and the sections' addresses (fragments of this page) and the
    # provider sign-in links' placeholders ("./", filled in by the page): the base keeps both
    # under the prefix.
    assert "#main" in links[4:] and all(link.startswith("#") or link == "./" for link in links[4:])
    assert '<base href="/">' in api.client.get("/").text  # no prefix: the root
    docs = prefixed.get("/docs").text
    for url in ("/rag/openapi.json", "/rag/docs-assets/swagger-ui-bundle.js"):
        assert url in docs
    redoc = prefixed.get("/redoc").text
    assert "/rag/openapi.json" in redoc and "/rag/docs-offline/redoc.standalone.js" in redoc
