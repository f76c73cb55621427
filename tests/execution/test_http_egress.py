"""Where an HTTP tool may connect (R6, R9, R10): fixed hosts, refused internal addresses.

No test here sends a packet anywhere but loopback. Refusals are shown before any
connection: a resolver double answers names (a public-looking name with a private
address, for DNS rebinding), and :class:`Network` — the socket layer under the guarded
transport — records every address asked for and fails the test on any that is not
loopback. Tools that do connect reach the loopback shop.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from dataclasses import dataclass, field

import httpcore
import httpx
import pytest
from shop import LOOPBACK
from test_http import ORDER, context

from harness import MIRA, proposal, spec
from toolbound import CallContext, Runtime
from toolbound._errors import ConfigurationError
from toolbound._state import State
from toolbound.config import ConfigError, hash_key, parse_config
from toolbound.execution.egress import (
    EgressPolicy,
    HostResource,
    address_refusal,
    destination_problem,
)
from toolbound.execution.http import (
    DestinationRefused,
    HttpTool,
    async_guarded_transport,
    guarded_transport,
)
from toolbound.execution.retry import BusinessRejection
from toolbound.execution.tool import NotCommitted, ToolOutput

# -- doubles ------------------------------------------------------------------------------


@dataclass
class Resolver:
    """Answers names from a table and records each question."""

    answers: dict[str, list[str]]
    asked: list[str] = field(default_factory=list)

    def resolve(self, host: str, port: int) -> list[str]:  # noqa: ARG002 - any port
        self.asked.append(host)
        return self.answers[host]

    async def aresolve(self, host: str, port: int) -> list[str]:
        return self.resolve(host, port)


class Network(httpcore.NetworkBackend):
    """The socket layer: records each address, connects to loopback, fails on any other."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self._real = httpcore.SyncBackend()

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        self.asked.append(host)
        if not ipaddress.ip_address(host).is_loopback:
            pytest.fail(f"a connection to {host} was attempted")
        return self._real.connect_tcp(host, port, timeout, local_address, socket_options)


class AsyncNetwork(httpcore.AsyncNetworkBackend):
    """:class:`Network`, async: records, and never connects at all."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def connect_tcp(self, host, *args, **kwargs):  # noqa: ARG002 - never connects
        self.asked.append(host)
        pytest.fail(f"a connection to {host} was attempted")

    async def sleep(self, seconds):
        await asyncio.sleep(seconds)


@pytest.fixture(params=["sync", "async"])
def call(request):
    """Runs a tool through __call__ or through acall on a fresh event loop."""
    if request.param == "sync":
        return lambda tool, arguments, ctx: tool(arguments, ctx)
    return lambda tool, arguments, ctx: asyncio.run(tool.acall(arguments, ctx))


def guarded_client(policy=LOOPBACK, *, resolver=None, network=None, **kw) -> httpx.Client:
    transport = guarded_transport(policy, resolver=resolver, network=network or Network())
    return httpx.Client(transport=transport, **kw)


def port_of(shop) -> int:
    return int(shop.base.rsplit(":", 1)[1])


# -- the address rules (pure) -------------------------------------------------------------

REFUSED = [
    ("127.0.0.1", "loopback"),
    ("::1", "loopback"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("192.168.1.1", "private"),
    ("fd12:3456::1", "private"),
    ("fc00::1", "private"),
    ("169.254.169.254", "metadata"),
    ("fd00:ec2::254", "metadata"),
    ("169.254.1.1", "link-local"),
    ("fe80::1", "link-local"),
    ("0.0.0.0", "unspecified"),  # noqa: S104 - an address under test, not a bind
    ("::", "unspecified"),
    ("224.0.0.1", "multicast"),
    ("ff02::1", "multicast"),
    ("255.255.255.255", "broadcast"),
    ("100.64.0.1", "not a public address"),
    ("fec0::1", "site-local"),
    ("::ffff:127.0.0.1", "loopback address (127.0.0.1) inside an IPv6"),
    ("::ffff:169.254.169.254", "metadata address (169.254.169.254) inside"),
    ("::ffff:10.0.0.1", "private address (10.0.0.1) inside"),
    ("2002:a9fe:a9fe::", "metadata address (169.254.169.254) inside"),  # 6to4
    ("64:ff9b::a00:1", "private address (10.0.0.1) inside"),  # NAT64
    ("64:ff9b:1::7f00:1", "loopback address (127.0.0.1) inside"),  # local-use NAT64
    ("::10.0.0.1", "private address (10.0.0.1) inside"),  # IPv4-compatible
]


@pytest.mark.parametrize(("address", "why"), REFUSED, ids=[a for a, _ in REFUSED])
def test_internal_addresses_are_refused(address, why):
    """Loopback, private, link-local, metadata and their IPv6-wrapped forms are refused."""
    reason = address_refusal(ipaddress.ip_address(address))
    assert reason is not None
    assert why in reason
    assert EgressPolicy().refusal(address, address) == reason


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address):
    """A public address, or an IPv4-mapped form of one, is not refused."""
    assert address_refusal(ipaddress.ip_address(address)) is None


def test_allow_list_admits_networks_and_names():
    """Networks admit the addresses in them (mapped forms too); names admit what they resolve to."""
    policy = EgressPolicy(allow=("10.20.0.0/16", "billing.internal", "::1"))
    assert policy.refusal("x.example", "10.20.3.4") is None
    assert policy.refusal("x.example", "::ffff:10.20.3.4") is None
    assert policy.refusal("x.example", "::1") is None
    assert policy.refusal("Billing.Internal.", "192.168.7.7") is None
    assert policy.refusal("x.example", "10.21.0.1") == "a private address"
    assert policy.refusal("x.example", "127.0.0.1") == "a loopback address"


def test_metadata_is_admitted_only_by_name():
    """Allowing the link-local range, or a host name, does not open the metadata service."""
    broad = EgressPolicy(allow=("169.254.0.0/16", "metadata.google.internal"))
    assert broad.refusal("printer.local", "169.254.7.7") is None
    assert broad.refusal("metadata.google.internal", "169.254.169.254") is not None
    assert EgressPolicy(allow=("169.254.169.254",)).refusal("x", "169.254.169.254") is None


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "not a host", "http://x/", "a/b"])
def test_bad_allow_entries_are_refused(entry):
    """An allow entry that is neither a network nor a host name fails at construction."""
    with pytest.raises(ConfigurationError, match="neither a network"):
        EgressPolicy(allow=(entry,))


# -- the destination is configuration -----------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://{host}/v1",
        "https://{host}:8443/v1",
        "http://api.example.com:{port}/v1",
        "http://{sub}.example.com/v1",
        "{scheme}://api.example.com/v1",
        "{base}/v1",
        "http://api.example.com{path}",
        "http://user@{host}/",
    ],
)
def test_placeholder_in_scheme_host_or_port_is_refused(url):
    """A URL whose scheme, host or port an argument fills cannot be built."""
    assert destination_problem(url) is not None
    with pytest.raises(ConfigurationError, match="HttpTool: url"):
        HttpTool(method="GET", url=url, effect="read")


def test_path_and_query_placeholders_stay_allowed():
    """Placeholders after the host (path, query) are fine: they are percent-encoded."""
    assert destination_problem("https://api.example.com:8443/orders/{id}?v={v}") is None


def test_declared_host_argument_must_be_the_whole_host():
    """With host_argument the host is exactly that placeholder, used nowhere else."""
    assert destination_problem("https://{host}:8443/x", host_argument="host") is None
    assert destination_problem("https://{host}.example/x", host_argument="host") is not None
    assert destination_problem("https://{other}/x", host_argument="host") is not None
    assert destination_problem("https://{host}/{host}", host_argument="host") is not None


@pytest.mark.parametrize("bad", ["evil.example@10.0.0.1", "a.example/x", "a.example:81", "[::1]"])
def test_host_argument_must_be_a_bare_host(shop, bad):
    """A host argument carrying userinfo, a path, a port or brackets is refused, unsent."""
    tool = HttpTool(method="GET", url="http://{host}/x", effect="read", host_argument="host")
    with pytest.raises(NotCommitted) as caught:
        tool.prepare({"host": bad}, context())
    assert caught.value.code == "invalid_argument"


def test_host_resource_names_the_host_for_a_domain_scope():
    """HostResource shows the chosen host, normalized, as a domain resource."""
    extract = HostResource("host", "read")
    (resource,) = extract({"host": "API.Example.com."})
    assert (resource.kind, resource.id, resource.action) == ("domain", "api.example.com", "read")
    assert extract({}) == ()


# -- the guarded transport: resolve once, check all, connect to the checked address -----


def test_dns_rebinding_to_a_private_address_is_refused_before_connecting():
    """A public-looking name that resolves to a private address is refused, nothing connected."""
    resolver = Resolver({"api.example.com": ["10.0.0.7"]})
    network = Network()
    with (
        guarded_client(EgressPolicy(), resolver=resolver, network=network) as client,
        pytest.raises(DestinationRefused, match=r"api\.example\.com resolves to 10\.0\.0\.7"),
    ):
        client.get("https://api.example.com/v1/weather")
    assert network.asked == []
    assert resolver.asked == ["api.example.com"]


def test_one_private_address_among_public_ones_refuses_the_name():
    """Every address is checked, so a name cannot hide a private address behind a public one."""
    resolver = Resolver({"api.example.com": ["93.184.216.34", "169.254.169.254"]})
    network = Network()
    with (
        guarded_client(EgressPolicy(), resolver=resolver, network=network) as client,
        pytest.raises(DestinationRefused, match="metadata"),
    ):
        client.get("http://api.example.com/")
    assert network.asked == []


def test_async_transport_refuses_before_connecting():
    """The async transport checks the same way, before its network is asked for anything."""
    resolver = Resolver({"api.example.com": ["fd00:ec2::254"]})
    network = AsyncNetwork()

    async def fetch() -> None:
        transport = async_guarded_transport(EgressPolicy(), resolver=resolver, network=network)
        async with httpx.AsyncClient(transport=transport) as client:
            await client.get("http://api.example.com/")

    with pytest.raises(DestinationRefused, match="metadata"):
        asyncio.run(fetch())
    assert network.asked == []


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://10.0.0.1/",
        "http://[fe80::1]/",
        "http://0.0.0.0/",
        "http://localhost/",
    ],
)
def test_literal_internal_destinations_fail_before_commit(url):
    """An HTTP tool aimed at an internal address fails with destination_refused, unsent."""
    network = Network()
    with guarded_client(EgressPolicy(), network=network) as client:
        tool = HttpTool(method="GET", url=url, effect="read", client=client)
        with pytest.raises(NotCommitted) as caught:
            tool({}, context())
    assert caught.value.code == "destination_refused"
    assert caught.value.recoverable is False
    assert caught.value.hint
    assert network.asked == []


def test_connection_goes_to_the_checked_address_with_the_name_kept(shop):
    """The name is resolved once; the socket goes to that address; Host still names the name."""
    resolver = Resolver({"shop.test": ["127.0.0.1"]})
    network = Network()
    with guarded_client(LOOPBACK, resolver=resolver, network=network) as client:
        answer = client.get(f"http://shop.test:{port_of(shop)}/echo-auth")
    assert answer.status_code == 200
    assert resolver.asked == ["shop.test"]
    assert network.asked == ["127.0.0.1"]
    assert shop.seen[0].headers["host"] == f"shop.test:{port_of(shop)}"


def test_http_tool_refuses_loopback_by_default(shop, call):
    """Without an allow-list, a tool whose host resolves to loopback never reaches the shop."""
    resolver = Resolver({"shop.test": ["127.0.0.1"]})
    url = f"http://shop.test:{port_of(shop)}/orders"
    tool = HttpTool(method="POST", url=url, effect="irreversible_write", resolver=resolver)
    with pytest.raises(NotCommitted) as caught:
        call(tool, ORDER, context())
    assert caught.value.code == "destination_refused"
    assert "loopback" in caught.value.message
    assert shop.seen == []


def test_allow_list_admits_the_loopback_shop(shop, call):
    """With loopback allowed, the same tool places the order through the resolved address."""
    resolver = Resolver({"shop.test": ["127.0.0.1"]})
    url = f"http://shop.test:{port_of(shop)}/orders"
    tool = HttpTool(
        method="POST", url=url, effect="irreversible_write", resolver=resolver, egress=LOOPBACK
    )
    out = call(tool, ORDER, context())
    assert isinstance(out, ToolOutput)
    assert len(shop.orders) == 1
    assert shop.seen[0].headers["host"] == f"shop.test:{port_of(shop)}"


# -- redirects --------------------------------------------------------------------------


def test_tool_does_not_follow_a_redirect(shop, call):
    """A 3xx is the service's answer: the tool never opens a connection to its Location."""
    shop.extra_headers["Location"] = f"http://127.0.0.2:{port_of(shop)}/orders"
    tool = HttpTool(
        method="GET",
        url=f"{shop.base}/status/302",
        effect="read",
        egress=EgressPolicy(allow=("127.0.0.1",)),
    )
    with pytest.raises(BusinessRejection) as caught:
        call(tool, {}, context())
    assert caught.value.status == 302
    assert len(shop.seen) == 1


def test_redirect_to_a_private_address_is_refused_on_the_hop(shop):
    """A client that follows redirects over the guard checks every hop: metadata is refused."""
    shop.extra_headers["Location"] = "http://169.254.169.254/latest/meta-data/"
    network = Network()
    with guarded_client(LOOPBACK, network=network, follow_redirects=True) as client:
        tool = HttpTool(method="GET", url=f"{shop.base}/status/302", effect="read", client=client)
        with pytest.raises(NotCommitted) as caught:
            tool({}, context())
    assert caught.value.code == "destination_refused"
    assert network.asked == ["127.0.0.1"]
    assert len(shop.seen) == 1


# -- through the runtime ----------------------------------------------------------------


def test_refused_destination_is_failed_before_commit_and_not_retried(harness, shop):
    """destination_refused ends FAILED_BEFORE_COMMIT after one attempt, whatever max_attempts."""
    resolver = Resolver({"shop.test": ["127.0.0.1"]})
    tool = HttpTool(
        method="GET",
        url=f"http://shop.test:{port_of(shop)}/echo-auth",
        effect="read",
        resolver=resolver,
    )
    harness.registry.register(spec("peek", max_attempts=3, output_schema=None), tool)
    out = harness.run("peek", {"text": "x"})
    assert out.kind == "failed"
    assert out.state is State.FAILED_BEFORE_COMMIT
    assert out.problem.code == "destination_refused"
    assert len(out.result.attempts) == 1
    assert resolver.asked == ["shop.test"]
    assert shop.seen == []


# -- configuration ----------------------------------------------------------------------

KEY = hash_key("k")
BASE = f"""
[store]
url = "memory"

[[principal]]
name = "agent"
key_sha256 = "{KEY}"
subject = "mira"
tenant = "acme"
roles = ["agent"]
"""
SCHEMA = """
[tools.http.input_schema]
type = "object"
properties = {{ host = {{ type = "string" }} }}
required = ["host"]
additionalProperties = false
"""


def http_tool(url: str, *extra: str) -> str:
    lines = [
        "[[tools.http]]",
        'name = "peek"',
        'description = "Peek at a host."',
        'method = "GET"',
        'effect = "read"',
        'capabilities = ["web:read"]',
        f'url = "{url}"',
        *extra,
    ]
    return "\n".join(lines) + SCHEMA.format()


def domain_grant(*domains: str) -> str:
    return (
        '\n[[grant]]\nsubject = "mira"\ntenant = "acme"\ncapability = "web:read"\n'
        f'actions = ["read"]\nscope = {{ kind = "domain", domains = {json.dumps(domains)} }}\n'
    )


def issues(text: str) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    return {issue.path: issue.message for issue in info.value.issues}


def test_check_config_refuses_a_placeholder_host():
    """A config HTTP tool with {host} in its URL and no declared host argument is refused."""
    found = issues(BASE + http_tool("http://{host}/status"))
    assert "tools.http[0].url" in found
    assert "fixed by configuration" in found["tools.http[0].url"]


def test_check_config_refuses_a_host_argument_without_a_domain_grant():
    """A declared host argument needs grants, and every grant of the tool a domain scope."""
    text = BASE + http_tool("http://{host}/status", 'host_argument = "host"')
    assert "no [[grant]]" in issues(text)["tools.http[0].host_argument"]
    unscoped = text + '\n[[grant]]\nsubject = "mira"\ntenant = "acme"\n'
    unscoped += 'capability = "web:read"\nactions = ["read"]\n'
    assert "needs a domain scope" in issues(unscoped)["grant[0].scope"]


def test_check_config_refuses_bad_allow_entries():
    """An allow_destinations entry that is neither network nor host is named by index."""
    text = BASE + http_tool(
        "http://api.example.com/", 'allow_destinations = ["10.0.0.0/8", "not a host"]'
    )
    assert "tools.http[0].allow_destinations[1]" in issues(text)


def test_domain_scoped_host_argument_allowed_for_granted_domain_denied_for_another(shop, clock):
    """The model picks the host; the domain grant admits localhost and denies any other host."""
    text = (
        BASE
        + http_tool(
            f"http://{{host}}:{port_of(shop)}/echo-auth",
            'host_argument = "host"',
            'allow_destinations = ["127.0.0.0/8", "::1"]',
        )
        + domain_grant("localhost")
    )
    config = parse_config(text)
    registry = config.build_registry()
    runtime = Runtime(policy=config.build_policy(clock), clock=clock)
    ctx = CallContext(subject=MIRA, tools=registry.toolset())
    try:
        allowed = runtime.run(proposal("peek", {"host": "localhost"}, "c1"), ctx)
        denied = runtime.run(proposal("peek", {"host": "example.com"}, "c2"), ctx)
        metadata = runtime.run(proposal("peek", {"host": "169.254.169.254"}, "c3"), ctx)
    finally:
        runtime.close()
    assert allowed.kind == "observed", allowed
    assert shop.seen[0].headers["host"] == f"localhost:{port_of(shop)}"
    for out in (denied, metadata):
        assert out.kind == "rejected"
        assert out.problem.code == "resource_out_of_scope"
    assert len(shop.seen) == 1


def test_config_tools_refuse_internal_addresses_without_an_allow_list(shop, clock):
    """A config HTTP tool with a fixed loopback URL and no allow-list is refused before sending."""
    text = (
        BASE
        + http_tool(f"http://127.0.0.1:{port_of(shop)}/echo-auth")
        + '\n[[grant]]\nsubject = "mira"\ntenant = "acme"\ncapability = "web:read"\n'
        + 'actions = ["read"]\n'
    )
    config = parse_config(text)
    runtime = Runtime(policy=config.build_policy(clock), clock=clock)
    try:
        out = runtime.run(
            proposal("peek", {"host": "x"}),
            CallContext(subject=MIRA, tools=config.build_registry().toolset()),
        )
    finally:
        runtime.close()
    assert out.kind == "failed"
    assert out.problem.code == "destination_refused"
    assert shop.seen == []
