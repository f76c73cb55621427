"""Where an HTTP tool may send its request: the egress rules, as pure functions (R6, R9).

Nothing here resolves a name or opens a socket. The HTTP tool
(:mod:`toolbound.execution.http`) resolves each host once, asks
:meth:`EgressPolicy.refusal` about *every* address it got, and connects only to an
address that passed — so a name cannot be re-resolved to somewhere else between the
check and the connection (DNS rebinding).

Two rules:

* **The destination is configuration.** The scheme, host and port of a URL template
  are written by whoever configures the tool, never filled from the model's arguments
  (:func:`destination_problem`). The one exception is declared: ``host_argument``
  names the argument that is the host, and :class:`HostResource` shows that host to
  authorization as a ``domain`` resource, so a ``DomainScope`` grant checks it
  against an allow-list before anything runs.
* **Internal addresses are refused** (:func:`address_refusal`): loopback, private
  (RFC 1918, shared 100.64/10, ULA fc00::/7), link-local (169.254/16, fe80::/10),
  cloud metadata (169.254.169.254, fd00:ec2::254), unspecified, multicast, broadcast,
  site-local and reserved ranges, including those forms wrapped in an IPv6 address
  (IPv4-mapped, IPv4-compatible, 6to4, NAT64). A deployment that needs an internal
  service lists it in :attr:`EgressPolicy.allow` (networks or host names).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeAlias

from toolbound._errors import ConfigurationError
from toolbound._model import Resource

# The very rule DomainScope compares hosts by: the host filled into a URL is then
# exactly the host authorization admitted.
from toolbound.gates.authorize import _normalize_host

if TYPE_CHECKING:
    from collections.abc import Sequence

    from toolbound._model import Action, JSONObject

__all__ = [
    "METADATA_ADDRESSES",
    "EgressPolicy",
    "HostResource",
    "address_refusal",
    "destination_problem",
    "host_text",
]

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_ADDRESSES: Final = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
"""Cloud instance-metadata services: admitted only by an allow entry naming the address."""

_SCHEMES: Final = frozenset({"http", "https"})
_BROADCAST: Final = ipaddress.IPv4Address("255.255.255.255")
_NAT64: Final = (
    ipaddress.IPv6Network("64:ff9b::/96"),  # RFC 6052 well-known prefix
    ipaddress.IPv6Network("64:ff9b:1::/48"),  # RFC 8215 local-use prefix
)
_IPV4_COMPATIBLE: Final = ipaddress.IPv6Network("::/96")
_HOST_TEMPLATE: Final = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}(?::[0-9]{1,5})?")


# -- addresses --------------------------------------------------------------------------


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for, where the network would reach it."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if any(ip in prefix for prefix in _NAT64) or (
        ip in _IPV4_COMPATIBLE and int(ip) > 1  # "::" and "::1" are themselves
    ):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_refusal(address: IPAddress) -> str | None:
    """Why ``address`` is not a public destination (e.g. ``"a loopback address"``), or ``None``.

    An IPv6 address that wraps an IPv4 one (IPv4-mapped, IPv4-compatible, 6to4,
    NAT64) is judged by the IPv4 address inside it.
    """
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(address, ipaddress.IPv6Address):
        inner = _embedded_ipv4(address)
        if inner is not None:
            why = address_refusal(inner)
            return None if why is None else f"{why} ({inner}) inside an IPv6 address"
        if address.is_site_local:
            return "a site-local address"
    checks = (
        (address.is_unspecified, "the unspecified address"),
        (address.is_loopback, "a loopback address"),
        (address.is_link_local, "a link-local address"),
        (address.is_multicast, "a multicast address"),
        (address == _BROADCAST, "the broadcast address"),
        (address.is_private, "a private address"),
        # 100.64/10 (carrier-grade NAT), reserved and documentation ranges.
        (not address.is_global or address.is_reserved, "not a public address"),
    )
    return next((why for refused, why in checks if refused), None)


def _parse_address(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class EgressPolicy:
    """Which destinations an HTTP tool may connect to.

    Public addresses always; an address :func:`address_refusal` refuses only when
    ``allow`` admits it. Each entry of ``allow`` is a network or an address
    (``"10.20.0.0/16"``, ``"127.0.0.1"``, ``"fd12::/48"``) or a host name
    (``"billing.internal"``): a network admits the addresses inside it (an
    IPv4-mapped or NAT64 address by the IPv4 address inside it); a host name admits
    whatever that name resolves to. A cloud metadata address is admitted only by an
    entry that is exactly that address. The default, ``EgressPolicy()``, admits no
    internal address at all.
    """

    allow: tuple[str, ...] = ()
    _networks: tuple[IPNetwork, ...] = field(init=False, repr=False, compare=False)
    _hosts: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Parse ``allow`` once; refuse an entry that is neither a network nor a host name."""
        if isinstance(self.allow, str):
            msg = "EgressPolicy.allow must be a sequence of strings, not one string"
            raise ConfigurationError(msg)
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        for entry in self.allow:
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            host = _normalize_host(entry) if "/" not in entry else None
            if host is None:
                msg = f"{entry!r} is neither a network (CIDR), an IP address nor a host name"
                raise ConfigurationError(msg)
            hosts.add(host)
        object.__setattr__(self, "allow", tuple(self.allow))
        object.__setattr__(self, "_networks", tuple(networks))
        object.__setattr__(self, "_hosts", frozenset(hosts))

    def refusal(self, host: str, address: str) -> str | None:
        """Why connecting to ``address``, which ``host`` resolved to, is refused; else ``None``."""
        ip = _parse_address(address)
        if ip is None:
            return "not an IP address"
        why = address_refusal(ip)
        if why is None or self._admits(host, ip):
            return None
        return why

    def _admits(self, host: str, ip: IPAddress) -> bool:
        if ip in METADATA_ADDRESSES:
            # Allowing "169.254.0.0/16" for a device on the link must not also open
            # the instance's credentials: the metadata service is named or refused.
            return any(net.num_addresses == 1 and ip in net for net in self._networks)
        if _normalize_host(host) in self._hosts:
            return True
        forms: list[IPAddress] = [ip]
        if isinstance(ip, ipaddress.IPv6Address) and (inner := _embedded_ipv4(ip)) is not None:
            forms.append(inner)
        return any(form in net for form in forms for net in self._networks)


# -- URL templates ----------------------------------------------------------------------


def destination_problem(template: str, *, host_argument: str | None = None) -> str | None:
    """What is wrong with where a URL template sends its request; ``None`` if nothing.

    The scheme must be ``http`` or ``https`` and, with no ``host_argument``, the
    authority (host and port) must have no ``{placeholder}``: it is configuration,
    not the model's choice. With ``host_argument``, the host must be exactly
    ``{<host_argument>}`` (a fixed ``:port`` may follow), and that argument fills
    nothing else.
    """
    scheme, separator, rest = template.partition("://")
    if not separator or scheme.lower() not in _SCHEMES:
        return f"must be an http(s) URL with a fixed scheme, got {template!r}"
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if host_argument is None:
        return _fixed_host_problem(authority, template)
    found = _HOST_TEMPLATE.fullmatch(authority)
    if found is None or found[1] != host_argument:
        return (
            f"with host_argument = {host_argument!r} the host must be exactly "
            f"{{{host_argument}}} (a fixed :PORT may follow), got {authority!r}"
        )
    if f"{{{host_argument}}}" in rest[len(authority) :]:
        return f"{{{host_argument}}} fills the host and cannot fill the rest of the URL"
    return None


def _fixed_host_problem(authority: str, template: str) -> str | None:
    if "{" in authority or "}" in authority:
        return (
            f"the host {authority!r} has a placeholder: the scheme, host and port are "
            "fixed by configuration, or the model could send the request anywhere "
            "(write the host, or declare host_argument and grant it with a domain scope)"
        )
    if not authority:
        return f"has no host: {template!r}"
    return None


def host_text(value: str) -> str | None:
    """``value`` as the host of a URL (IDNA, lowercase, IPv6 in brackets); ``None`` if it is none.

    Only a plain DNS name or an IP literal passes: no port, userinfo, path or brackets.
    """
    host = _normalize_host(value)
    if host is None:
        return None
    return f"[{host}]" if ":" in host else host


@dataclass(frozen=True, slots=True)
class HostResource:
    """A resource extractor: the host argument of an HTTP tool, as a ``domain`` resource.

    Give it to the tool's spec (``resources=HostResource("host", "read")``) so that a
    :class:`~toolbound.gates.authorize.DomainScope` grant decides which hosts the model
    may choose (R6). A missing argument names no resource, which a scoped grant
    refuses (``scope_unchecked``); a value that is not a host name is shown as it is,
    and no domain scope admits it.
    """

    argument: str
    action: Action

    def __call__(self, arguments: JSONObject) -> Sequence[Resource]:
        """The one ``domain`` resource the call's host argument names."""
        value = arguments.get(self.argument)
        if not isinstance(value, str):
            return ()
        return (Resource(kind="domain", id=_normalize_host(value) or value, action=self.action),)
