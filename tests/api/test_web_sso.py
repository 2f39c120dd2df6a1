"""Signing in to the web app through the organisation's identity provider, as a person does it
in Chromium: a real service process, its single sign-on set with the CLI (the secret on stdin),
and a real OpenID provider (Glewlwyd) with its own sign-in page."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from browser import A11Y_AUDIT, screenshot
from cryptography.fernet import Fernet
from glewlwyd import Glewlwyd, running_glewlwyd
from playwright.sync_api import expect

from testkit.live_server import LiveServer

pytestmark = pytest.mark.integration

TENANT = "sso-web"
CLIENT_SECRET = "web-client-secret-" + secrets.token_hex(8)
PASSWORD = "wendy-Password-1"
ADMIN_PASSWORD = "sso web admin password"


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Glewlwyd]:
    with running_glewlwyd(tmp_path_factory.mktemp("glewlwyd-web")) as glewlwyd:
        glewlwyd.add_user("wendy", PASSWORD, email="wendy@acme.example", groups=["rag-members"])
        yield glewlwyd


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, provider: Glewlwyd) -> Iterator[LiveServer]:
    server = LiveServer(
        tmp_path_factory.mktemp("web-sso") / "data",
        {"RAG_SSO_ALLOW_HTTP": "true", "RAG_SECRETS_KEY": Fernet.generate_key().decode()},
    )
    callback = f"{server.url}/auth/sso/callback"
    provider.add_client("rag-web", CLIENT_SECRET, callback)
    provider.grant("wendy", "rag-web", ["openid", "profile", "email"])
    server.create_user(TENANT, "root", ADMIN_PASSWORD)  # the tenant's first user: admin
    settings = server.data_dir.parent / "sso.json"
    settings.write_text(
        '{"display_name": "Acme Login", "role_groups": {"member": ["rag-members"]}}'
    )
    out = server.cli(
        "set-sso",
        "--tenant",
        TENANT,
        "--issuer",
        provider.issuer,
        "--client-id",
        "rag-web",
        "--client-secret-stdin",
        "--settings",
        str(settings),
        stdin=CLIENT_SECRET + "\n",
    )
    assert "Acme Login" in out and CLIENT_SECRET not in out
    with server.running():
        yield server
    assert CLIENT_SECRET not in server.log_path.read_text(errors="replace")


def test_a_person_signs_in_with_the_provider_and_out_again(
    live: LiveServer, provider: Glewlwyd, browser: Any
) -> None:
    page = browser.new_page()
    page.goto(live.url)
    page.get_by_label("Organisation").fill(TENANT)
    page.get_by_label("User name").click()  # leaving the field asks who signs it in
    offer = page.get_by_role("link", name="Sign in with Acme Login")
    expect(offer).to_be_visible()
    screenshot(page, "sso-offer.png")
    assert page.evaluate(A11Y_AUDIT) == {"unnamed": [], "low": []}
    offer.click()
    # Glewlwyd's own sign-in page
    page.wait_for_url(re.compile(rf"^{re.escape(provider.url)}"))
    login = page.get_by_role("textbox", name="Login")
    expect(login).to_be_visible(timeout=15_000)
    screenshot(page, "sso-provider-login.png")
    login.fill("wendy")
    page.get_by_role("textbox", name="Password").fill(PASSWORD)
    page.get_by_role("button", name="OK").click()
    go_on = page.get_by_role("button", name=re.compile("Continue"))
    expect(go_on).to_be_visible(timeout=15_000)  # "Hello wendy. Connection to rag-web"
    go_on.click()
    page.wait_for_url(re.compile(rf"^{re.escape(live.url)}/"), timeout=30_000)
    expect(page.locator("#session-user")).to_have_text("wendy@acme.example", timeout=30_000)
    expect(page.locator("#session-role")).to_have_text("member")
    assert "sso_code" not in page.url, "the one-time code must leave the address at once"
    screenshot(page, "sso-signed-in.png")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_text("You are signed out.")).to_be_visible()
    expect(page.get_by_role("link", name="sign out there too")).to_be_visible()
    page.close()
