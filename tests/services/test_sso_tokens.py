"""The provider token checks and the signing-key cache, with real signed JWTs (pyjwt and
cryptography) and a provider faked at the HTTP transport: every refusal OpenID Connect Core asks
for, key rotation, and failing closed while the provider is down."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from jwt.utils import base64url_encode

from app.errors import SsoFailure
from app.services.sso.mapping import domain_allowed, mapped_role, provider_groups, username_for
from app.services.sso.provider import JWKS_REFETCH_S, OidcProviders
from app.services.sso.signin import safe_next_path
from app.services.sso.tokens import TokenRefused, verify_access_token, verify_id_token

pytestmark = pytest.mark.unit

ISSUER = "https://idp.example.org/realms/acme"
CLIENT = "rag-web"
NONCE = "n-0S6_WzA2Mj"


def _rsa() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


RSA_KEY = _rsa()
OTHER_RSA_KEY = _rsa()
EC_KEY = ec.generate_private_key(ec.SECP256R1())


def jwk_of(key: Any, kid: str, alg: str) -> dict[str, Any]:
    """The public JWK of a private key."""
    algorithm = RSAAlgorithm if alg == "RS256" else ECAlgorithm
    jwk: dict[str, Any] = json.loads(algorithm.to_jwk(key.public_key()))
    return {**jwk, "kid": kid, "alg": alg, "use": "sig"}


class FakeProvider:
    """Discovery and a JWKS at the HTTP transport; `down` makes every request fail."""

    def __init__(self, keys: list[dict[str, Any]]) -> None:
        self.keys = keys
        self.down = False
        self.jwks_fetches = 0

    def handle(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        if request.url.path.endswith("/.well-known/openid-configuration"):
            return httpx.Response(
                200,
                json={
                    "issuer": ISSUER,
                    "authorization_endpoint": f"{ISSUER}/auth",
                    "token_endpoint": f"{ISSUER}/token",
                    "jwks_uri": f"{ISSUER}/certs",
                },
            )
        if request.url.path.endswith("/certs"):
            self.jwks_fetches += 1
            return httpx.Response(200, json={"keys": self.keys})
        return httpx.Response(404)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def providers(fake: FakeProvider, clock: Clock, cache_s: float = 3600) -> OidcProviders:
    return OidcProviders(5.0, cache_s, clock=clock, transport=httpx.MockTransport(fake.handle))


class FromNow(int):
    """A time claim given as seconds from the moment the token is built, not from collection."""


def id_claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    changes = {k: now + v if isinstance(v, FromNow) else v for k, v in changes.items()}
    claims: dict[str, Any] = {
        "iss": ISSUER,
        "sub": "248289761001",
        "aud": CLIENT,
        "exp": now + 300,
        "iat": now,
        "nonce": NONCE,
        "email": "ada@acme.example",
    }
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


def sign(claims: dict[str, Any], key: Any = RSA_KEY, kid: str = "k1", alg: str = "RS256") -> str:
    return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})


@pytest.fixture
def setup() -> tuple[FakeProvider, Clock, OidcProviders]:
    fake = FakeProvider([jwk_of(RSA_KEY, "k1", "RS256"), jwk_of(EC_KEY, "e1", "ES256")])
    clock = Clock()
    return fake, clock, providers(fake, clock)


def check_id(
    token: str, found: OidcProviders, nonce: str = NONCE, client: str = CLIENT
) -> dict[str, Any]:
    return verify_id_token(
        token, found.key_lookup(ISSUER), issuer=ISSUER, client_id=client, nonce=nonce
    )


def refusal(check: Callable[[], object]) -> str:
    with pytest.raises(TokenRefused) as caught:
        check()
    assert caught.value.message == "the identity provider's token is invalid or expired"
    return caught.value.reason


def test_a_valid_id_token_passes_with_rs256_and_es256(setup: Any) -> None:
    _, _, found = setup
    assert check_id(sign(id_claims()), found)["sub"] == "248289761001"
    assert check_id(sign(id_claims(), EC_KEY, "e1", "ES256"), found)["email"] == "ada@acme.example"


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"iss": "https://evil.example.org/realms/acme"}, "issuer"),
        ({"aud": "another-client"}, "audience"),
        ({"aud": [CLIENT, "another-client"]}, "azp"),  # several audiences need azp
        ({"azp": "another-client"}, "azp"),
        ({"exp": FromNow(-120)}, "expired"),  # beyond the 60 s skew
        ({"nbf": FromNow(600)}, "not_yet_valid"),
        ({"iat": FromNow(600)}, "not_yet_valid"),
        ({"nonce": "another-sign-in"}, "nonce"),
        ({"nonce": None}, "nonce"),
        ({"sub": None}, "malformed"),
    ],
)
def test_each_defect_of_an_id_token_is_refused(
    setup: Any, changes: dict[str, Any], reason: str
) -> None:
    _, _, found = setup
    assert refusal(lambda: check_id(sign(id_claims(**changes)), found)) == reason


def test_an_expiry_within_the_clock_skew_still_passes(setup: Any) -> None:
    _, _, found = setup
    assert check_id(sign(id_claims(exp=int(time.time()) - 20)), found)


def test_several_audiences_with_this_client_as_azp_pass(setup: Any) -> None:
    _, _, found = setup
    assert check_id(sign(id_claims(aud=[CLIENT, "api"], azp=CLIENT)), found)


def test_alg_none_is_refused(setup: Any) -> None:
    _, _, found = setup
    unsigned = jwt.encode(id_claims(), None, algorithm="none", headers={"kid": "k1"})
    assert refusal(lambda: check_id(unsigned, found)) == "algorithm"


def test_hs256_keyed_with_the_public_key_is_refused(setup: Any) -> None:
    _, _, found = setup
    public_pem = RSA_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    # pyjwt refuses to HMAC with a PEM key, so forge the signature by hand, as an attacker would.
    header = {"alg": "HS256", "typ": "JWT", "kid": "k1"}
    segments = [base64url_encode(json.dumps(part).encode()) for part in (header, id_claims())]
    signing_input = b".".join(segments)
    signature = hmac.new(public_pem, signing_input, hashlib.sha256).digest()
    forged = (signing_input + b"." + base64url_encode(signature)).decode()
    assert refusal(lambda: check_id(forged, found)) == "algorithm"


def test_a_signature_by_another_key_with_a_known_kid_is_refused(setup: Any) -> None:
    _, _, found = setup
    assert refusal(lambda: check_id(sign(id_claims(), OTHER_RSA_KEY, "k1"), found)) == "signature"


def test_an_rsa_algorithm_on_an_ec_key_is_refused(setup: Any) -> None:
    _, _, found = setup
    token = sign(id_claims(), RSA_KEY, "e1", "RS256")  # kid of the EC key, alg RS256
    assert refusal(lambda: check_id(token, found)) == "algorithm"


def test_an_unknown_kid_is_refused_after_one_refetch(setup: Any) -> None:
    fake, clock, found = setup
    assert check_id(sign(id_claims()), found)  # fills the cache
    clock.now += JWKS_REFETCH_S
    token = sign(id_claims(), OTHER_RSA_KEY, "rotated-away")
    assert refusal(lambda: check_id(token, found)) == "unknown_key"
    assert fake.jwks_fetches == 2  # the fill, then one refetch for the unknown kid
    for _ in range(20):
        assert refusal(lambda: check_id(token, found)) == "unknown_key"
    assert fake.jwks_fetches == 2, "a flood of unknown kids must not refetch within a minute"


def test_a_rotated_key_is_fetched_once_a_minute_at_most(setup: Any) -> None:
    fake, clock, found = setup
    assert check_id(sign(id_claims()), found)
    fake.keys = [jwk_of(OTHER_RSA_KEY, "k2", "RS256")]  # the provider rotates
    rotated = sign(id_claims(), OTHER_RSA_KEY, "k2")
    clock.now += 5  # the first fetch was just now: no refetch yet
    assert refusal(lambda: check_id(rotated, found)) == "unknown_key"
    clock.now += JWKS_REFETCH_S
    assert check_id(rotated, found)["sub"] == "248289761001"
    assert fake.jwks_fetches == 2


def test_while_the_provider_is_down_known_keys_work_until_the_cache_ends(setup: Any) -> None:
    fake, clock, found = setup
    assert check_id(sign(id_claims()), found)
    fake.down = True
    clock.now += 1800
    assert check_id(sign(id_claims()), found), "a known key keeps working within its lifetime"
    unknown = sign(id_claims(), OTHER_RSA_KEY, "k9")
    assert refusal(lambda: check_id(unknown, found)) == "unknown_key"  # fail closed
    clock.now += 1900  # past the cache lifetime, and the provider still down
    assert refusal(lambda: check_id(sign(id_claims()), found)) == "unknown_key"
    fake.down = False
    clock.now += JWKS_REFETCH_S
    assert check_id(sign(id_claims()), found), "back once the provider answers again"


def test_access_tokens_are_checked_against_the_configured_audience(setup: Any) -> None:
    _, _, found = setup
    claims = id_claims(aud="rag-api", nonce=None, client_id="script")
    lookup = found.key_lookup(ISSUER)
    assert verify_access_token(sign(claims), lookup, issuer=ISSUER, audience="rag-api")
    wrong = sign({**claims, "aud": "another-api"})
    assert (
        refusal(lambda: verify_access_token(wrong, lookup, issuer=ISSUER, audience="rag-api"))
        == "audience"
    )
    expired = sign({**claims, "exp": int(time.time()) - 300})
    assert (
        refusal(lambda: verify_access_token(expired, lookup, issuer=ISSUER, audience="rag-api"))
        == "expired"
    )


def test_an_id_token_is_not_accepted_as_an_access_token(setup: Any) -> None:
    _, _, found = setup
    lookup = found.key_lookup(ISSUER)
    id_token = sign(id_claims())  # aud: the client id, as an Entra ID v2 access token's is
    with pytest.raises(TokenRefused) as caught:
        verify_access_token(id_token, lookup, issuer=ISSUER, audience=CLIENT)
    assert caught.value.reason == "token_type"
    keycloak_id = sign(id_claims(nonce=None, typ="ID"))
    with pytest.raises(TokenRefused):
        verify_access_token(keycloak_id, lookup, issuer=ISSUER, audience=CLIENT)


@pytest.mark.parametrize(
    "target",
    ["//evil.example/", "https://evil.example/", "/\\evil.example", "evil", "javascript:alert(1)"],
)
def test_next_must_stay_on_this_origin(target: str) -> None:
    with pytest.raises(SsoFailure) as caught:
        safe_next_path(target)
    assert caught.value.http_status == 400


def test_next_keeps_a_path_of_this_site() -> None:
    assert safe_next_path("/") == "/"
    assert safe_next_path("/?tab=1#account") == "/?tab=1"


def test_the_highest_mapped_role_wins_and_none_refuses() -> None:
    role_groups = {"admin": ["it-admins"], "member": ["staff"], "reader": ["guests"]}
    assert mapped_role(["guests", "it-admins"], role_groups, None) == "admin"
    assert mapped_role(["staff"], role_groups, None) == "member"
    assert mapped_role(["sales"], role_groups, "reader") == "reader"
    assert mapped_role(["sales"], role_groups, None) is None


def test_groups_come_from_a_list_a_string_or_a_nested_claim() -> None:
    assert provider_groups({"groups": ["a", "b", 3]}, "groups") == ["a", "b"]
    assert provider_groups({"groups": "a"}, "groups") == ["a"]
    assert provider_groups({"realm_access": {"roles": ["x"]}}, "realm_access.roles") == ["x"]
    assert provider_groups({}, "groups") == []


def test_domains_and_user_names() -> None:
    assert domain_allowed({"email": "Ada@Acme.example"}, ["acme.example"])
    assert not domain_allowed({"email": "ada@evil.example"}, ["acme.example"])
    assert not domain_allowed(
        {"email": "ada@acme.example", "email_verified": False}, ["acme.example"]
    )
    assert not domain_allowed({}, ["acme.example"])
    assert domain_allowed({}, [])
    assert username_for({"sub": "1", "preferred_username": "ada", "email": "a@b.example"}) == "ada"
    assert username_for({"sub": "1", "email": "Ada@B.example"}) == "ada@b.example"
    assert username_for({"sub": "svc-client"}) == "svc-client"
