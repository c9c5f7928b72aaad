"""Bearer JWTs from an OpenID Connect provider: who a token names, if it is valid.

A token is valid when its signature verifies with a key of the provider's JWKS (by the
token's ``kid``), its ``alg`` is one of ``JWT_ALGORITHMS`` (asymmetric only: a symmetric
algorithm would let anyone holding the public key sign), it has not expired (``exp`` is
required), it is not early (``nbf``), its issuer is ``JWT_ISSUER`` and, when ``JWT_AUDIENCE``
is set, it is meant for that audience; ``JWT_LEEWAY_S`` of clock skew is allowed each way. The
principal is ``User:<claim>``, the claim ``JWT_PRINCIPAL_CLAIM`` names (``sub`` by default).
PyJWT does the cryptography.

The keys: fetched from ``JWT_JWKS_URL`` or, without it, from the ``jwks_uri`` of the issuer's
``/.well-known/openid-configuration``; kept for ``JWKS_MAX_AGE_S`` and fetched again after
(the old keys stay in use while the provider cannot be reached). A token with a ``kid`` not in
the set makes the gateway fetch the set again, the way a provider's key rotation shows up,
but at most once per ``JWKS_MIN_REFETCH_S``: a client sending made-up ``kid``s cannot turn
the gateway against its provider.

Every malformed token is ``InvalidToken``, whatever PyJWT raises for it: an unparseable or
unsupported header (a ``kid`` that is not a string, an unknown ``crit`` extension), or a date
claim (``exp``, ``nbf``, ``iat``) that is not a JSON number, as RFC 7519's NumericDate is (PyJWT
would read ``"exp": "9999999999"`` as a date). tests/unit/test_tokens_fuzz.py sends arbitrary
JSON headers and claims, signed and not, and proves nothing else escapes.

A token that verified is a ``TokenCredential``: whom it names, and whether it still holds (its
``exp`` not past, its key still listed by the provider), which a stream it opened asks on every
poll.

Verdicts are kept: a token that verified is remembered (under its SHA-256, at most
``remembered`` of them) until it expires or the key set changes, so a client sending the same
token on every request pays for one signature check. Refusals are not remembered, and cost
no more than a header parse when the ``kid`` is unknown.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import ssl
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final

import httpx
import jwt
import orjson

log = logging.getLogger("brokergate")

ASYMMETRIC: Final = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
JWKS_MAX_AGE_S: Final = 300.0
JWKS_MIN_REFETCH_S: Final = 10.0
_FETCH_TIMEOUT_S: Final = 5.0
_MAX_JWKS_BYTES: Final = 1024 * 1024


class InvalidToken(Exception):
    """The token does not authenticate anyone; the message says why (safe to show the client)."""


class KeysUnavailable(Exception):
    """The provider's keys could not be fetched and none are known."""


@dataclass(frozen=True, slots=True)
class TokenRules:
    issuer: str
    audience: str | None
    jwks_url: str | None
    algorithms: tuple[str, ...]
    leeway_s: float
    principal_claim: str


class KeySet:
    """The provider's signing keys by ``kid``, fetched when needed, at most so often."""

    def __init__(self, rules: TokenRules, *, verify: ssl.SSLContext | bool = True) -> None:
        self.rules = rules
        self._http = httpx.AsyncClient(timeout=_FETCH_TIMEOUT_S, verify=verify, follow_redirects=False)
        self._keys: dict[str, tuple[jwt.PyJWK, str | None]] = {}  # kid → key, the "alg" it declares
        self._fingerprint = b""
        self._fetched_at = -float("inf")  # monotonic time of the last fetch tried
        self._loaded_at = -float("inf")  # of the last one that worked
        self._jwks_url = rules.jwks_url
        self._lock = asyncio.Lock()
        self.version = 0  # bumped whenever the keys change

    async def close(self) -> None:
        await self._http.aclose()

    async def key(self, kid: str | None) -> tuple[jwt.PyJWK, str | None]:
        """The key of ``kid`` (of the only key when there is no ``kid``) and the algorithm it is
        for, if its JWK says."""
        now = time.monotonic()
        if now - self._loaded_at >= JWKS_MAX_AGE_S:
            await self._refresh(due=True)
        found = self._find(kid)
        if found is None and time.monotonic() - self._fetched_at >= JWKS_MIN_REFETCH_S:
            await self._refresh(due=False)  # maybe the provider rotated its keys
            found = self._find(kid)
        if found is None:
            if not self._fingerprint:  # never fetched
                raise KeysUnavailable("the identity provider's keys could not be fetched")
            raise InvalidToken("the token is signed with a key the identity provider does not list")
        return found

    async def lists(self, kid: str | None) -> bool:
        """Whether the provider still lists the key of ``kid`` (as ``key`` finds it), by keys at
        most ``JWKS_MAX_AGE_S`` old; while the provider cannot be reached, the last keys known."""
        if time.monotonic() - self._loaded_at >= JWKS_MAX_AGE_S:
            await self._refresh(due=True)
        return self._find(kid) is not None

    def _find(self, kid: str | None) -> tuple[jwt.PyJWK, str | None] | None:
        if kid is not None:
            return self._keys.get(kid)
        return next(iter(self._keys.values())) if len(self._keys) == 1 else None

    async def _refresh(self, *, due: bool) -> None:
        async with self._lock:
            now = time.monotonic()
            if due and now - self._loaded_at < JWKS_MAX_AGE_S:
                return  # another request refreshed them meanwhile
            if not due and now - self._fetched_at < JWKS_MIN_REFETCH_S:
                return
            self._fetched_at = now
            try:
                keys, fingerprint = await self._fetch()
            except (httpx.HTTPError, ValueError) as exc:
                log.warning("cannot fetch the JWT signing keys: %s", exc)
                if due:
                    self._loaded_at = now - JWKS_MAX_AGE_S + JWKS_MIN_REFETCH_S  # try again soon
                return
            if fingerprint != self._fingerprint:
                self.version += 1  # a key withdrawn: the tokens it verified are checked again
                self._fingerprint = fingerprint
            self._keys, self._loaded_at = keys, now

    async def _fetch(self) -> tuple[dict[str, tuple[jwt.PyJWK, str | None]], bytes]:
        if self._jwks_url is None:
            discovery = self.rules.issuer.rstrip("/") + "/.well-known/openid-configuration"
            uri = (await self._get_json(discovery)).get("jwks_uri")
            if not isinstance(uri, str):
                raise ValueError(f"{discovery} names no jwks_uri")
            self._jwks_url = uri
        document = await self._get_json(self._jwks_url)
        keys: dict[str, tuple[jwt.PyJWK, str | None]] = {}
        used: list[dict[str, Any]] = []
        listed = document.get("keys")
        for data in listed if isinstance(listed, list) else ():
            if not isinstance(data, dict) or data.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(data)
            except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError, KeyError):
                continue  # a key type or curve this gateway cannot use: skip it, keep the others
            declared = data.get("alg")
            if declared is None or declared in self.rules.algorithms:
                keys[str(data.get("kid", ""))] = (key, declared if isinstance(declared, str) else None)
                used.append(data)
        return keys, hashlib.sha256(orjson.dumps(used, option=orjson.OPT_SORT_KEYS)).digest()

    async def _get_json(self, url: str) -> dict[str, Any]:
        response = await self._http.get(url, headers={"Accept": "application/json"})
        response.raise_for_status()
        if len(response.content) > _MAX_JWKS_BYTES:
            raise ValueError(f"{url} answered more than {_MAX_JWKS_BYTES} bytes")
        document = response.json()
        if not isinstance(document, dict):
            raise ValueError(f"{url} did not answer a JSON object")
        return document


@dataclass(frozen=True, slots=True)
class TokenCredential:
    """A token that verified: the ``principal`` it names, and what it stays valid for: until its
    ``expires`` (``exp``, seconds since the epoch) plus the leeway, while the provider lists the
    key it was signed with (``kid``)."""

    principal: str
    expires: float
    kid: str | None
    keys: KeySet

    async def still_valid(self) -> bool:
        """Whether the token would still be accepted (but for the signature, checked once)."""
        if time.time() >= self.expires + self.keys.rules.leeway_s:
            return False
        try:
            return await self.keys.lists(self.kid)
        except Exception:  # the provider's failures are the KeySet's to absorb; a bug must not end streams
            log.exception("cannot tell whether the JWT signing key %r is still listed", self.kid)
            return True


_DATES: Final = ("exp", "nbf", "iat")
_FAR: Final = 1e15  # seconds since the epoch past any token's life; a float holds it exactly


class TokenVerifier:
    """Bearer token → principal, with the verdicts of good tokens remembered."""

    def __init__(self, rules: TokenRules, keys: KeySet, *, remembered: int = 10_000) -> None:
        self.rules = rules
        self.keys = keys
        self._remembered = remembered
        self._good: OrderedDict[bytes, tuple[TokenCredential, int]] = OrderedDict()  # → it, key set version

    async def principal(self, token: str) -> str:
        """``User:<claim>`` of a valid token; ``InvalidToken`` or ``KeysUnavailable`` otherwise."""
        return (await self.verify(token)).principal

    async def verify(self, token: str) -> TokenCredential:
        """The credential of a valid token; ``InvalidToken`` or ``KeysUnavailable`` otherwise."""
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        known = self._good.get(digest)
        if known is not None:
            credential, version = known
            if time.time() < credential.expires + self.rules.leeway_s and version == self.keys.version:
                self._good.move_to_end(digest)
                return credential
            del self._good[digest]
        try:
            # PyJWT checks ``kid`` and ``crit`` here, and raises its root error, not DecodeError, for them
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise InvalidToken("the token is not a JWT, or its header is not accepted") from None
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in self.rules.algorithms:
            raise InvalidToken(f"the token's algorithm {_shown(algorithm)} is not accepted")
        kid = header.get("kid")  # a string if present: PyJWT refused any other
        kid = kid if isinstance(kid, str) else None
        key, declared = await self.keys.key(kid)
        if declared is not None and declared != algorithm:
            raise InvalidToken(f"the token's algorithm {algorithm!r} is not the one its key is for")
        claims = self._decode(token, key, algorithm)
        name = claims.get(self.rules.principal_claim)
        if not isinstance(name, str) or not name:
            raise InvalidToken(f"the token has no {self.rules.principal_claim!r} claim naming its principal")
        credential = TokenCredential(f"User:{name}", float(min(claims["exp"], _FAR)), kid, self.keys)
        self._good[digest] = (credential, self.keys.version)
        while len(self._good) > self._remembered:
            self._good.popitem(last=False)
        return credential

    def _decode(self, token: str, key: jwt.PyJWK, algorithm: str) -> dict[str, Any]:
        required = ["exp", "iss"] + (["aud"] if self.rules.audience is not None else [])
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[algorithm],
                audience=self.rules.audience,
                issuer=self.rules.issuer,
                leeway=self.rules.leeway_s,
                options={"require": required, "verify_aud": self.rules.audience is not None},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("the token is not valid yet") from None
        except jwt.InvalidAudienceError:
            raise InvalidToken("the token is not meant for this gateway (audience)") from None
        except jwt.InvalidIssuerError:
            raise InvalidToken("the token is from another issuer") from None
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidToken(f"the token has no {exc.claim!r} claim") from None
        except jwt.InvalidSignatureError:
            raise InvalidToken("the token's signature does not verify") from None
        except (jwt.InvalidTokenError, jwt.InvalidKeyError, ValueError, TypeError, OverflowError):
            raise InvalidToken("the token is not valid") from None
        for claim in _DATES:
            if claim in claims and not _numeric_date(claims[claim]):
                raise InvalidToken(f"the token's {claim!r} claim is not a NumericDate (a JSON number)")
        return claims


def _numeric_date(value: object) -> bool:
    """Whether ``value`` is an RFC 7519 NumericDate: a JSON number (not a string, not a boolean)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _shown(value: object) -> str:
    """``value`` for a message to the client: short, whatever the token put there."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
