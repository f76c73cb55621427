"""Who is calling: static API keys, and OAuth 2.0 / OIDC bearer JWTs.

A caller is a :class:`Principal`: a subject, a tenant and roles (R6: the subject of
every call comes from here, never from the model). Two kinds of credential map to one:

* an **API key**, stored hashed in a ``[[principal]]`` table (:func:`hash_key`);
* a **bearer JWT** from an identity provider one ``[[identity.jwt]]`` table trusts::

      [[identity.jwt]]
      issuer = "https://login.example.com/"    # the token's iss, exactly
      audience = "toolbound"                   # its aud must name this
      jwks_url = "https://login.example.com/.well-known/jwks.json"   # or jwks_file
      tenant_claim = "tid"                     # or tenant = "acme" for every token
      roles_claim = "roles"
      role_map = { "Tools.Approve" = "approver", "Tools.Call" = "agent" }

  The token's signature is checked with the issuer's keys (a JWKS document, fetched
  on first use, again after ``jwks_ttl`` and when a token names a key id it does not
  hold, at most once per ``jwks_refresh_interval`` whether or not keys are held, one
  fetch in flight per issuer, waited for at most a second), with an algorithm the table
  allows (asymmetric by default; ``none`` never; HMAC only with a secret from
  ``secret_env`` and then nothing else), and its ``exp``/``nbf`` with
  ``clock_skew`` seconds of grace. The subject claim becomes the principal's
  subject and name.

A token that fails is refused with a :class:`TokenRefused` whose ``code`` says why:

=========================  ======  ===============================================
code                       status  meaning
=========================  ======  ===============================================
``unauthenticated``        401     no credential, or a key no principal holds
``token_invalid``          401     not a well-formed JWT
``token_algorithm_refused``401     its ``alg`` is not one the issuer's table allows
``token_key_unknown``      401     no key of the issuer has its ``kid``
``token_signature_invalid``401     the signature does not verify
``token_issuer_invalid``   401     no ``[[identity.jwt]]`` trusts its ``iss``
``token_audience_invalid`` 401     its ``aud`` does not name the issuer's audience
``token_expired``          401     past ``exp`` (beyond the clock skew)
``token_not_yet_valid``    401     before ``nbf`` or ``iat`` (beyond the clock skew)
``token_claim_missing``    401     a required claim, the subject or the tenant is absent
``token_roles_unmapped``   403     ``role_map`` maps none of the token's roles
``identity_unavailable``   503     the issuer's keys (or secret) cannot be had now
=========================  ======  ===============================================

Verifying is pure but for the key source: :class:`JwksCache` calls a fetch function
(a file read or an HTTP GET through urllib), which tests and embedders may replace.
PyJWT (``pip install 'toolbound[service]'``) is imported on first use.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolbound._errors import ToolboundError
from toolbound._loopguard import check_off_loop

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path

    from jwt import PyJWK

__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "DEFAULT_ALGORITHMS",
    "HMAC_ALGORITHMS",
    "ROLES",
    "Identity",
    "JwksCache",
    "JwtIssuer",
    "Principal",
    "TokenRefused",
    "hash_key",
    "may_fetch",
]

_log = logging.getLogger(__name__)

ASYMMETRIC_ALGORITHMS: frozenset[str] = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
HMAC_ALGORITHMS: frozenset[str] = frozenset({"HS256", "HS384", "HS512"})
ROLES: frozenset[str] = frozenset({"agent", "approver", "operator"})
DEFAULT_ALGORITHMS: tuple[str, ...] = ("RS256", "ES256", "EdDSA")
# The JWK key type each asymmetric algorithm family signs with: a key of another type
# is never tried (an RSA key cannot vouch for an ES256 token).
_KEY_TYPES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}
_MAX_TOKEN = 16 << 10  # bytes; larger bearer values are not tokens anyone issues
_MAX_JWKS = 1 << 20  # bytes of a JWKS document
_MAX_KEYS = 64  # keys kept from one document
_FETCH_TIMEOUT = 5.0  # seconds for one JWKS fetch
_FETCH_WAIT = 1.0  # seconds a verifier waits for a fetch in flight


def may_fetch(token: str) -> bool:
    """Whether verifying ``token`` may fetch an issuer's keys: whether it is JWT-shaped.

    An API key (``secrets.token_urlsafe``, never a dot) is a hash look-up; only a
    compact JWS (three dot-separated parts) is verified, which may reach a JWKS URL.
    An async caller runs these off its event loop, the others inline.
    """
    return token.count(".") == 2  # noqa: PLR2004 - header.payload.signature


def hash_key(key: str) -> str:
    """The hex SHA-256 an API key is stored as."""
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """Who a credential stands for. The subject of every call comes from here (R6).

    A principal from a JWT has no key (``key_sha256`` is empty) and is named by its
    subject claim.
    """

    name: str
    key_sha256: str = field(repr=False)
    subject: str
    tenant: str
    roles: frozenset[str]

    def matches(self, key: str) -> bool:
        """Whether ``key`` is this principal's key (constant-time comparison)."""
        return bool(self.key_sha256) and hmac.compare_digest(hash_key(key), self.key_sha256)


class TokenRefused(ToolboundError):  # noqa: N818 - it names the event, like h11's
    """A credential that names no caller; ``code`` says why, ``status`` is the HTTP answer."""

    code = "unauthenticated"

    def __init__(self, message: str, *, code: str | None = None, status: int = 401) -> None:
        super().__init__(message, code=code)
        self.status = status


@dataclass(frozen=True, slots=True, kw_only=True)
class JwtIssuer:
    """One ``[[identity.jwt]]`` table: an issuer whose tokens are trusted, and how to read them."""

    issuer: str
    audience: str
    jwks_url: str | None = None
    jwks_file: Path | None = None
    secret_env: str | None = None  # HMAC only: the variable holding the shared secret
    secret: str | None = field(default=None, repr=False)  # HMAC only: the secret itself
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    clock_skew: float = 60.0
    required_claims: tuple[str, ...] = ()
    subject_claim: str = "sub"
    tenant_claim: str | None = None
    tenant: str | None = None  # every token's tenant, when the tokens carry none
    roles_claim: str = "roles"
    role_map: Mapping[str, str] = field(default_factory=dict)
    jwks_ttl: float = 300.0
    jwks_refresh_interval: float = 30.0


class JwksCache:
    """The keys of one JWKS document, fetched lazily and kept for ``ttl`` seconds.

    A key id the cached document lacks fetches it again. Fetches are rate-limited
    whether or not keys are held: none starts sooner than ``refresh_interval`` after
    the last one began, so a stream of made-up key ids — or of tokens naming an
    issuer whose provider is down — costs the provider one request per interval, and
    a failed fetch is remembered for that long (a negative cache: tokens needing it
    are refused ``identity_unavailable`` at once). One fetch is in flight at a time,
    on a thread of its own; a verifier waits for it at most ``wait`` seconds, so a
    provider that accepts connections and never answers holds nobody longer than
    that. Held keys keep serving while they are refreshed, and after a failed fetch.
    Verification fails closed: no key, no principal.
    """

    def __init__(
        self,
        fetch: Callable[[], bytes],
        *,
        ttl: float,
        refresh_interval: float,
        wait: float = _FETCH_WAIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._ttl = ttl
        self._interval = refresh_interval
        self._wait = wait
        self._clock = clock
        self._keys: dict[str | None, PyJWK] | None = None
        self._fetched = float("-inf")  # when the last fetch began
        self._loaded = float("-inf")  # when the keys held were fetched
        self._failure: str | None = None  # why the last fetch failed, until one succeeds
        self._flight: threading.Event | None = None
        self._lock = threading.Lock()

    def key(self, kid: str | None) -> PyJWK:
        """The key with id ``kid`` (or the only key, for a token naming none)."""
        check_off_loop("fetching an identity provider's keys")
        flight = self._found_or_flight(kid)
        if isinstance(flight, threading.Event):
            flight.wait(self._wait)
            with self._lock:
                flight = self._find(kid)
        if flight is not None:
            return flight
        with self._lock:
            held, failure = self._keys, self._failure
        if held is None:
            why = f": {failure}" if failure else f" (no answer within {self._wait:g} s)"
            msg = f"the issuer's keys cannot be had now{why}"
            raise TokenRefused(msg, code="identity_unavailable", status=503)
        msg = f"the issuer holds no key with id {kid!r}"
        raise TokenRefused(msg, code="token_key_unknown")

    def status(self) -> dict[str, object]:
        """What a readiness check reports of this issuer's keys."""
        with self._lock:
            keys, failure, fetching = self._keys, self._failure, self._flight is not None
            if fetching and self._clock() - self._fetched >= self._wait:
                failure = failure or f"no answer within {self._wait:g} s"
        if keys is None:
            state = "unavailable" if failure else ("fetching" if fetching else "not_fetched")
        else:
            state = "ready"
        return {"status": state, "keys": len(keys or {}), "error": failure}

    def _found_or_flight(self, kid: str | None) -> PyJWK | threading.Event | None:
        """The key if held and fresh; else the fetch to wait for (started if due), or none."""
        with self._lock:
            now = self._clock()
            found = self._find(kid)
            fresh = self._keys is not None and now - self._loaded < self._ttl
            if found is not None and fresh:
                return found
            if self._flight is None and now - self._fetched >= self._interval:
                self._start(now)
            # A held key serves while its document is fetched again. A fetch in flight
            # longer than a verifier may wait is waited for by nobody else.
            if found is not None or now - self._fetched >= self._wait:
                return found
            return self._flight

    def _find(self, kid: str | None) -> PyJWK | None:
        keys = self._keys or {}
        if kid is None and len(keys) == 1:
            return next(iter(keys.values()))
        return keys.get(kid)

    def _start(self, now: float) -> None:
        self._fetched = now
        flight = self._flight = threading.Event()
        threading.Thread(
            target=self._refresh, args=(flight,), name="toolbound-jwks", daemon=True
        ).start()

    def _refresh(self, flight: threading.Event) -> None:
        keys: dict[str | None, PyJWK] | None = None
        failure = None
        try:
            keys = _parse_jwks(self._fetch())
        except Exception as exc:  # noqa: BLE001 - any failure is a failed fetch, and the flight must end
            failure = str(exc) or type(exc).__name__
            _log.warning("cannot fetch the issuer's keys: %s", failure)
        with self._lock:
            if keys is not None:
                self._keys, self._loaded = keys, self._clock()
            self._failure = failure
            self._flight = None
        flight.set()


def _parse_jwks(raw: bytes) -> dict[str | None, PyJWK]:
    from jwt import PyJWK, PyJWKError  # noqa: PLC0415 - an optional dependency

    if len(raw) > _MAX_JWKS:
        msg = f"the JWKS document is over {_MAX_JWKS} bytes"
        raise ValueError(msg)
    document = json.loads(raw)
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        msg = "the JWKS document has no keys array"
        raise ValueError(msg)  # noqa: TRY004 - a malformed document, like bad JSON
    keys: dict[str | None, PyJWK] = {}
    for entry in entries[:_MAX_KEYS]:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        try:
            key = PyJWK(entry)
        except PyJWKError:
            continue  # a key type or curve this build cannot use; others may serve
        if key.key_type == "oct":
            continue  # a shared secret has no place in a public key set
        keys[entry.get("kid")] = key
    return keys


def _fetch_url(url: str) -> Callable[[], bytes]:
    def fetch() -> bytes:
        request = urllib.request.Request(url, headers={"Accept": "application/json"})  # noqa: S310 - the scheme is checked to be http(s) when the configuration loads
        with urllib.request.urlopen(request, timeout=_FETCH_TIMEOUT) as response:  # noqa: S310
            return bytes(response.read(_MAX_JWKS + 1))

    return fetch


def _fetch_file(path: Path) -> Callable[[], bytes]:
    return path.read_bytes


class Identity:
    """The issuers whose bearer JWTs name callers, each with its own key cache.

    ``fetch`` builds the function that fetches an issuer's JWKS document; the default
    reads ``jwks_file`` or GETs ``jwks_url``.
    """

    def __init__(
        self,
        issuers: Sequence[JwtIssuer] = (),
        *,
        fetch: Callable[[JwtIssuer], Callable[[], bytes]] | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.issuers = tuple(issuers)
        self._fetch = fetch or _default_fetch
        self._now = now
        self._caches: dict[str, JwksCache] = {}
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self.issuers)

    def verify(self, token: str) -> Principal:
        """The principal a bearer JWT stands for, or :class:`TokenRefused` saying why."""
        import jwt  # noqa: PLC0415 - an optional dependency

        if len(token) > _MAX_TOKEN:
            msg = "the token is too large"
            raise TokenRefused(msg, code="token_invalid")
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            msg = "not a well-formed JWT"
            raise TokenRefused(msg, code="token_invalid") from None
        _numeric_dates(unverified)
        issuer = next((i for i in self.issuers if i.issuer == unverified.get("iss")), None)
        if issuer is None:
            msg = f"no trusted issuer is {unverified.get('iss')!r}"
            raise TokenRefused(msg, code="token_issuer_invalid")
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in issuer.algorithms:
            msg = f"algorithm {alg!r} is not one of {', '.join(issuer.algorithms)}"
            raise TokenRefused(msg, code="token_algorithm_refused")
        claims = self._decode(token, issuer, alg, header.get("kid"))
        return _principal(issuer, claims)

    def _decode(self, token: str, issuer: JwtIssuer, alg: str, kid: object) -> dict[str, Any]:
        import jwt  # noqa: PLC0415 - an optional dependency

        key: object
        if alg in HMAC_ALGORITHMS:
            secret = issuer.secret or os.environ.get(issuer.secret_env or "")
            if not secret:
                msg = f"the secret variable {issuer.secret_env} is unset"
                raise TokenRefused(msg, code="identity_unavailable", status=503)
            key = secret.encode()
        else:
            jwk = self._cache(issuer).key(kid if isinstance(kid, str) else None)
            if jwk.key_type != _KEY_TYPES.get(alg[:2]):
                msg = f"key {kid!r} is not a key for {alg}"
                raise TokenRefused(msg, code="token_algorithm_refused")
            key = jwk.key
        try:
            return jwt.decode(
                token,
                key=key,  # type: ignore[arg-type]  # PyJWT's key union omits some key classes
                algorithms=[alg],
                audience=issuer.audience,
                issuer=issuer.issuer,
                leeway=issuer.clock_skew,
                options={"require": ["exp", "iss", "aud", *issuer.required_claims]},
            )
        except jwt.PyJWTError as exc:
            msg = str(exc) or "the token is invalid"
            code = _JWT_CODES.get(_jwt_error(exc), "token_invalid")
            raise TokenRefused(msg, code=code) from None

    def status(self) -> list[dict[str, object]]:
        """Each issuer's keys as a readiness check reports them (nothing is fetched)."""
        found: list[dict[str, object]] = []
        for issuer in self.issuers:
            if issuer.secret is not None or issuer.secret_env is not None:
                held = bool(issuer.secret or os.environ.get(issuer.secret_env or ""))
                state: dict[str, object] = {"status": "ready" if held else "unavailable"}
            else:
                with self._lock:
                    cache = self._caches.get(issuer.issuer)
                state = cache.status() if cache is not None else {"status": "not_fetched"}
            found.append({"issuer": issuer.issuer, **state})
        return found

    def _cache(self, issuer: JwtIssuer) -> JwksCache:
        with self._lock:
            cache = self._caches.get(issuer.issuer)
            if cache is None:
                cache = JwksCache(
                    self._fetch(issuer),
                    ttl=issuer.jwks_ttl,
                    refresh_interval=issuer.jwks_refresh_interval,
                )
                self._caches[issuer.issuer] = cache
            return cache


def _default_fetch(issuer: JwtIssuer) -> Callable[[], bytes]:
    if issuer.jwks_file is not None:
        return _fetch_file(issuer.jwks_file)
    if issuer.jwks_url is not None:
        return _fetch_url(issuer.jwks_url)
    msg = f"[[identity.jwt]] {issuer.issuer} names no JWKS"
    raise ValueError(msg)


# PyJWT's exceptions by name; a subclass is looked up by its nearest listed ancestor.
_JWT_CODES = {
    "ExpiredSignatureError": "token_expired",
    "ImmatureSignatureError": "token_not_yet_valid",
    "InvalidAudienceError": "token_audience_invalid",
    "InvalidIssuerError": "token_issuer_invalid",
    "MissingRequiredClaimError": "token_claim_missing",
    "InvalidSignatureError": "token_signature_invalid",
    "InvalidAlgorithmError": "token_algorithm_refused",
    "InvalidKeyError": "token_algorithm_refused",
}


def _jwt_error(exc: Exception) -> str:
    return next((c.__name__ for c in type(exc).__mro__ if c.__name__ in _JWT_CODES), "")


_NUMERIC_DATES = ("exp", "nbf", "iat")


def _numeric_dates(claims: Mapping[str, object]) -> None:
    """RFC 7519 §2: ``exp``, ``nbf`` and ``iat`` are NumericDates, JSON numbers only.

    Checked before any key is fetched: ``"exp": "9999999999"`` is no date, whatever a
    lenient decoder would make of it.
    """
    for name in _NUMERIC_DATES:
        value = claims.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            msg = f"the {name!r} claim must be a JSON number (a NumericDate), not {value!r}"
            raise TokenRefused(msg, code="token_invalid")


def _principal(issuer: JwtIssuer, claims: Mapping[str, object]) -> Principal:
    subject = claims.get(issuer.subject_claim)
    if not isinstance(subject, str) or not subject:
        msg = f"the token has no {issuer.subject_claim!r} claim"
        raise TokenRefused(msg, code="token_claim_missing")
    tenant = issuer.tenant
    if issuer.tenant_claim is not None:
        tenant = claims.get(issuer.tenant_claim)  # type: ignore[assignment]  # checked next
    if not isinstance(tenant, str) or not tenant:
        msg = f"the token has no {issuer.tenant_claim!r} claim"
        raise TokenRefused(msg, code="token_claim_missing")
    return Principal(
        name=subject, key_sha256="", subject=subject, tenant=tenant, roles=_roles(issuer, claims)
    )


def _roles(issuer: JwtIssuer, claims: Mapping[str, object]) -> frozenset[str]:
    """The toolbound roles the token's roles claim grants (a list, or a space-separated string)."""
    value = claims.get(issuer.roles_claim, [])
    names = value.split() if isinstance(value, str) else value
    if not isinstance(names, list):
        return frozenset()
    found = {n for n in names if isinstance(n, str)}
    if not issuer.role_map:
        return frozenset(found & ROLES)
    mapped = frozenset(issuer.role_map[n] for n in found if n in issuer.role_map)
    if not mapped:
        # A token whose roles all fall outside the map would act as nobody: say so,
        # naming the claim and the map, rather than answer every request 403.
        listed = ", ".join(sorted(issuer.role_map)) or "nothing"
        msg = (
            f"none of the token's {issuer.roles_claim!r} claim values ({sorted(found)}) is in"
            f" the issuer's role_map, which maps {listed}"
        )
        raise TokenRefused(msg, code="token_roles_unmapped", status=403)
    return mapped
