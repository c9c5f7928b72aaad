"""Whatever a client puts in a Bearer token, the verifier answers InvalidToken (or KeysUnavailable).

Headers and claims are arbitrary JSON, some of it shaped like what a verifier trips on (``kid``
that is not a string, ``crit``, ``b64``, dates as strings, huge numbers, NaN), signed with the
provider's real key, so the claims are read, or not signed at all. The keys come from a real
provider on loopback (``tests.oidc.IdentityProvider``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jwt.algorithms import RSAAlgorithm

from service.security.tokens import InvalidToken, KeySet, KeysUnavailable, TokenRules, TokenVerifier
from tests.oidc import IdentityProvider

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
NOW = int(time.time())
# values a verifier is likely to mishandle, next to arbitrary JSON
DATES = st.sampled_from([NOW + 3600, str(NOW + 3600), float(NOW + 3600), True, 10**400, -(10**400)]) | JSON
KIDS = st.sampled_from(["k1", "", "other"]) | JSON
ALGS = st.sampled_from(["RS256", "ES256", "HS256", "none", ""]) | JSON
CRIT = st.sampled_from([["x"], ["b64"], [], "b64"]) | JSON


class Harness:
    """A verifier of the provider's tokens, on an event loop of its own (hypothesis calls a sync test)."""

    def __init__(self, provider: IdentityProvider) -> None:
        self.provider = provider
        rules = TokenRules(
            issuer=provider.issuer,
            audience="brokergate",
            jwks_url=provider.jwks_url,
            algorithms=("RS256", "ES256"),
            leeway_s=30,
            principal_claim="sub",
        )
        self.loop = asyncio.new_event_loop()
        self.keys = KeySet(rules)
        self.verifier = TokenVerifier(rules, self.keys)
        _, self.private = provider.keys["k1"]

    def token(self, header: dict[str, Any], claims: Any, *, signed: bool) -> str:
        def part(data: Any) -> bytes:
            raw = json.dumps(data, allow_nan=True).encode()
            return base64.urlsafe_b64encode(raw).rstrip(b"=")

        signing_input = part(header) + b"." + part(claims)
        signature = RSAAlgorithm(RSAAlgorithm.SHA256).sign(signing_input, self.private) if signed else b"x"
        return (signing_input + b"." + base64.urlsafe_b64encode(signature).rstrip(b"=")).decode()

    def verdict(self, token: str) -> str:
        """The principal, or the name of the expected exception (anything else is raised)."""
        try:
            return self.loop.run_until_complete(self.verifier.principal(token))
        except (InvalidToken, KeysUnavailable) as exc:
            return type(exc).__name__


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    with IdentityProvider() as provider:
        provider.add_key("k1")
        h = Harness(provider)
        try:
            yield h
        finally:
            h.loop.run_until_complete(h.keys.close())
            h.loop.close()


def test_a_good_token_verifies(harness: Harness) -> None:
    claims = harness.provider.claims("alice")
    assert harness.verdict(harness.token({"alg": "RS256", "kid": "k1"}, claims, signed=True)) == "User:alice"


@pytest.mark.parametrize(
    "header",
    [
        {"alg": "RS256", "crit": ["x"]},
        {"alg": "RS256", "kid": 5},
        {"alg": "RS256", "kid": None},
        {"alg": "RS256", "kid": "k1", "crit": ["b64"]},
        {"alg": ["RS256"], "kid": "k1"},
    ],
)
def test_the_headers_that_caused_a_500_are_invalid_tokens(harness: Harness, header: dict[str, Any]) -> None:
    for signed in (True, False):
        token = harness.token(header, harness.provider.claims("alice"), signed=signed)
        assert harness.verdict(token) == "InvalidToken"


@pytest.mark.parametrize("claim", ["exp", "nbf", "iat"])
def test_a_date_that_is_a_string_is_not_a_numeric_date(harness: Harness, claim: str) -> None:
    claims = harness.provider.claims("alice")
    claims[claim] = str(claims["exp"] if claim == "exp" else NOW)
    token = harness.token({"alg": "RS256", "kid": "k1"}, claims, signed=True)
    assert harness.verdict(token) == "InvalidToken"


@settings(max_examples=400)
@given(
    alg=ALGS,
    kid=KIDS,
    crit=st.none() | CRIT,
    extra_header=st.dictionaries(st.text(max_size=8), JSON, max_size=3),
    dates=st.fixed_dictionaries({}, optional={"exp": DATES, "nbf": DATES, "iat": DATES}),
    sub=st.just("alice") | JSON,
    aud=st.just("brokergate") | JSON,
    extra_claims=st.dictionaries(st.text(max_size=8), JSON, max_size=3),
    signed=st.booleans(),
)
def test_arbitrary_headers_and_claims_raise_nothing_but_invalid_token(
    harness: Harness,
    alg: Any,
    kid: Any,
    crit: Any,
    extra_header: dict[str, Any],
    dates: dict[str, Any],
    sub: Any,
    aud: Any,
    extra_claims: dict[str, Any],
    signed: bool,
) -> None:
    header = {**extra_header, "alg": alg, "kid": kid}
    if crit is not None:
        header["crit"] = crit
    claims = {**extra_claims, "iss": harness.provider.issuer, "aud": aud, "sub": sub, **dates}
    verdict = harness.verdict(harness.token(header, claims, signed=signed))
    if verdict.startswith("User:"):  # accepted: then it was a good token in every respect
        assert signed and alg == "RS256" and sub == verdict.removeprefix("User:")
        assert isinstance(dates.get("exp"), (int, float)) and not isinstance(dates["exp"], bool)


@settings(max_examples=200)
@given(header=JSON, claims=JSON, signed=st.booleans())
def test_headers_and_claims_of_any_json_type_are_invalid_tokens(
    harness: Harness, header: Any, claims: Any, signed: bool
) -> None:
    def part(data: Any) -> bytes:
        return base64.urlsafe_b64encode(json.dumps(data, allow_nan=True).encode()).rstrip(b"=")

    signing_input = part(header) + b"." + part(claims)
    signature = RSAAlgorithm(RSAAlgorithm.SHA256).sign(signing_input, harness.private) if signed else b"x"
    token = (signing_input + b"." + base64.urlsafe_b64encode(signature).rstrip(b"=")).decode()
    assert harness.verdict(token) in ("InvalidToken", "KeysUnavailable")


@settings(max_examples=200)
@given(token=st.text(max_size=200) | st.from_regex(r"\A[A-Za-z0-9_\-]*\.[A-Za-z0-9_\-]*\.[A-Za-z0-9_\-]*\Z"))
def test_any_string_is_a_principal_or_an_invalid_token(harness: Harness, token: str) -> None:
    assert harness.verdict(token) in ("InvalidToken", "KeysUnavailable")
