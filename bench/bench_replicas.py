"""The service's concurrency aims: head-of-line wait, replicas on one store, CPU per request.

Each aim of the service's concurrency work, measured with the real ``toolbound serve``
(uvicorn, one process per replica) on loopback, driven by ``wrk`` with read-only
proposals (the same request as ``bench_service.py``), every figure a ratio to a
figure taken in the same run:

* **8 connections on one replica**: p50 with 8 connections at most 2.5x the latency
  of one request alone (one connection): no request waits behind another's store
  round trip. One process answers 8 requests at once in no less than 8 x its CPU
  per request, whatever it waits on; the aim's line prints that floor beside it.
  The same again for one replica of a process per core (``--workers``, at least 2),
  whose floor is 8 / workers x its CPU per request.
* **SQLite, two replicas on one file**: with the same 8 connections split over two
  replicas (two ``wrk`` at once, 4 each), at least 1.0x the throughput of one
  replica, and a p99 (the worse of the two) at most 1.5x one replica's (each the
  lowest p99 of its rounds).
* **PostgreSQL, two replicas**: the same on a throwaway cluster (``tests/pgcluster.py``,
  fsync on): at least 1.8x one replica's throughput.
* **CPU per request**: the server's process CPU time (``/proc``: user + system of the
  replica) over the requests it answered, PostgreSQL at most 1.3x SQLite.
* **The service against the bare endpoint keeping the same record**
  (``bench/service/bare_app.py``, ``BARE_RECORD=trace``): at least 90% of its throughput.

Every server runs for the whole benchmark, idle but for its turn; the rounds take turns
and each figure is the best round of its own (by requests/s; latency figures by their
lowest p50). A replica's CPU utilisation (CPU seconds per wall second) is printed beside
it: on a machine of two cores, one replica that already uses most of a core, plus
``wrk`` and PostgreSQL, leaves a second replica little to add, whatever the code does —
the print says so rather than hide it.

Without PostgreSQL's binaries (``tests/pgcluster.py``) the PostgreSQL cases are left out.
Run: ``PYTHONPATH=src .venv/bin/python bench/bench_replicas.py [--quick]``
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from bench_service import HERE, KEY, _stop, config, free_port, start
from pgcluster import find_bindir, throwaway_cluster

if TYPE_CHECKING:
    from collections.abc import Callable

_TICK = os.sysconf("SC_CLK_TCK")
WORKERS = max(2, os.cpu_count() or 1)
"""The workers of the one replica serving on every core (``toolbound serve --workers``)."""


@dataclass(frozen=True)
class Run:
    """One ``wrk`` run against one or more servers, summed."""

    rps: float
    requests: int
    p50: float
    p99: float
    cpu: float  # CPU seconds the servers used during the run
    wall: float  # seconds the run took

    @property
    def cpu_per_request(self) -> float:
        """Server CPU µs per answered request."""
        return self.cpu / self.requests * 1e6

    @property
    def utilisation(self) -> float:
        """Server CPU seconds per wall second (1.0: one core busy the whole run)."""
        return self.cpu / self.wall


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid``, its threads and its worker processes."""
    stats: dict[int, list[str]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # After the command: state is field 3, the parent 4; utime, stime 14 and 15.
            stats[int(stat.parent.name)] = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, ValueError):
            continue  # a process that ended meanwhile
    family, grew = {pid}, True
    while grew:
        more = {p for p, f in stats.items() if int(f[1]) in family} - family
        family |= more
        grew = bool(more)
    return sum(int(stats[p][11]) + int(stats[p][12]) for p in family if p in stats) / _TICK


def _wrk_argv(url: str, connections: int, seconds: int, script: str) -> list[str]:
    return [
        "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", script,
        "-H", f"Authorization: Bearer {KEY}", "-H", "Content-Type: application/json", url,
    ]  # fmt: skip


def _parse(out: str) -> tuple[int, float, float]:
    """Requests, p50 and p99 (ms) of one ``wrk`` output; refuses any non-2xx answer."""
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        msg = f"{non2xx.group(1)} failed requests:\n{out}"
        raise RuntimeError(msg)
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]

    def pct(p: str) -> float:
        m = re.search(rf"\s{p}%\s+([\d.]+)(us|ms|s)", out)
        value, unit = float(m.group(1)), m.group(2)  # type: ignore[union-attr]
        return value * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]

    return requests, pct("50"), pct("99")


def drive(targets: list[tuple[str, int]], connections: int, seconds: int, body: str) -> Run:
    """``wrk`` at each (url, pid) at once, ``connections`` each; summed, worse p50/p99."""
    script = (
        f"wrk.method = 'POST'\nwrk.body = {json.dumps(body)}\n"
        f"run_id = '{os.urandom(4).hex()}'\n" + (HERE / "post.lua").read_text()
    )
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
    try:
        before = [cpu_seconds(pid) for _, pid in targets]
        t0 = time.perf_counter()
        processes = [
            subprocess.Popen(  # noqa: S603 - wrk with our own arguments
                _wrk_argv(url, connections, seconds, f.name), stdout=subprocess.PIPE, text=True
            )
            for url, _ in targets
        ]
        outs = [p.communicate()[0] for p in processes]
        wall = time.perf_counter() - t0
        used = sum(cpu_seconds(pid) - b for (_, pid), b in zip(targets, before, strict=True))
    finally:
        Path(f.name).unlink()
    parsed = [_parse(out) for out in outs]
    requests = sum(r for r, _, _ in parsed)
    return Run(
        rps=requests / seconds,
        requests=requests,
        p50=max(p50 for _, p50, _ in parsed),
        p99=max(p99 for _, _, p99 in parsed),
        cpu=used,
        wall=wall,
    )


@dataclass
class Servers:
    """The servers of the benchmark: two replicas per store, the bare endpoint."""

    folder: Path
    processes: list[subprocess.Popen[bytes]]

    def serve(self, store_url: str, name: str, workers: int = 1) -> tuple[str, int]:
        """A ``toolbound serve`` replica on ``store_url``: its proposals URL and pid."""
        folder = self.folder / name
        folder.mkdir(exist_ok=True)
        path = config(folder)
        path.write_text(path.read_text().replace("sqlite:///toolbound.db", store_url))
        port = free_port()
        url = f"http://127.0.0.1:{port}/v1/proposals"
        argv = [
            sys.executable, "-c", "from toolbound.cli import main; main()", "serve",
            "--config", str(path), "--port", str(port), "--workers", str(workers),
        ]  # fmt: skip
        process = start(argv, f"GET http://127.0.0.1:{port}/healthz", folder)
        self.processes.append(process)
        return url, process.pid

    def bare(self) -> tuple[str, int]:
        """The bare endpoint keeping the journal's record of a read: its URL and pid."""
        port = free_port()
        argv = [sys.executable, "-m", "uvicorn", "bare_app:app", "--log-level", "warning"]
        argv += ["--port", str(port)]
        url = f"http://127.0.0.1:{port}/call"
        process = start(argv, f"POST {url}", self.folder, "trace")
        self.processes.append(process)
        return url, process.pid


def measure(
    cases: dict[str, Callable[[int], Run]], rounds: int, seconds: int
) -> dict[str, list[Run]]:
    """Every case once per round, the rounds taking turns; all runs of each."""
    runs: dict[str, list[Run]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, case in cases.items():
            runs[name].append(case(seconds))
    return runs


def best(runs: list[Run], *, by: str = "rps") -> Run:
    """The least disturbed run: highest throughput, or lowest p50 for latency."""
    if by == "p50":
        return min(runs, key=lambda r: r.p50)
    return max(runs, key=lambda r: r.rps)


def main() -> None:
    """Start every server, drive each case in interleaved rounds, print each aim."""
    if shutil.which("wrk") is None:
        print("SKIPPED: wrk is not installed (apt-get install wrk); nothing measured")
        return
    bindir = find_bindir()
    quick = "--quick" in sys.argv
    seconds, warmup, rounds = (2, 2, 3) if quick else (4, 6, 5)
    body = json.dumps(
        {"tool": "bench.shout", "arguments": json.dumps({"text": "hello"}), "call_id": "c"}
    )
    with ExitStack() as stack, tempfile.TemporaryDirectory() as folder:
        servers = Servers(Path(folder), [])
        stack.callback(lambda: [_stop(p) for p in servers.processes])
        sqlite = f"sqlite:///{Path(folder) / 'shared.db'}"
        s1, s2 = servers.serve(sqlite, "s1"), servers.serve(sqlite, "s2")
        sw = servers.serve(sqlite, "sw", workers=WORKERS)
        bare = servers.bare()
        cases: dict[str, Callable[[int], Run]] = {
            "sqlite, 1 connection": lambda s: drive([s1], 1, s, body),
            "sqlite, 8 connections": lambda s: drive([s1], 8, s, body),
            "sqlite, 2 replicas": lambda s: drive([s1, s2], 4, s, body),
            f"sqlite, {WORKERS} workers": lambda s: drive([sw], 8, s, body),
            "bare, its record": lambda s: drive([bare], 8, s, body),
        }
        if bindir is not None:
            cluster = stack.enter_context(throwaway_cluster(bindir, databases=("bench",)))
            pg = f"postgresql://{cluster.user}@{cluster.host}:{cluster.port}/bench"
            p1, p2 = servers.serve(pg, "p1"), servers.serve(pg, "p2")
            cases |= {
                "postgres, 1 connection": lambda s: drive([p1], 1, s, body),
                "postgres, 8 connections": lambda s: drive([p1], 8, s, body),
                "postgres, 2 replicas": lambda s: drive([p1, p2], 4, s, body),
            }
        # Steady state: the stores' files and pools grow to their working size first.
        for target in [s1, s2, sw, bare] + ([p1, p2] if bindir is not None else []):
            drive([target], 8, warmup, body)
        runs = measure(cases, rounds, seconds)
    report(runs, rounds, seconds, postgres=bindir is not None)


def report(runs: dict[str, list[Run]], rounds: int, seconds: int, *, postgres: bool) -> None:
    """The table of every case's best round, then each aim: the figure, met or not."""
    print(f"read-only proposals over HTTP, wrk, best of {rounds} interleaved rounds of {seconds} s")
    head = f"{'':26}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'CPU us/req':>12}{'CPU/wall':>10}"
    head += f"{'p99, every round':>22}"
    print(head)
    for name, all_runs in runs.items():
        r = best(all_runs, by="p50" if "1 connection" in name else "rps")
        print(
            f"{name:26}{r.rps:>9.0f}{r.p50:>9.2f}{r.p99:>9.2f}"
            f"{r.cpu_per_request:>12.0f}{r.utilisation:>10.2f}"
            f"{min(x.p99 for x in all_runs):>11.1f}-{max(x.p99 for x in all_runs):.1f}"
        )
    print()
    aims = _aims(runs, postgres=postgres)
    for aim, figure, met, note in aims:
        print(f"{aim:52} {figure:>8}  {'met' if met else 'NOT MET'}{note}")


def _aims(runs: dict[str, list[Run]], *, postgres: bool) -> list[tuple[str, str, bool, str]]:
    stores = ("sqlite", "postgres") if postgres else ("sqlite",)
    one = {s: best(runs[f"{s}, 1 connection"], by="p50") for s in stores}
    eight = {s: best(runs[f"{s}, 8 connections"]) for s in stores}
    two = {s: best(runs[f"{s}, 2 replicas"]) for s in stores}
    bare = best(runs["bare, its record"])
    aims: list[tuple[str, str, bool, str]] = []

    def aim(label: str, ratio: float, bound: float, *, below: bool = False, note: str = "") -> None:
        figure = f"{ratio:.0%}" if label.endswith("%") else f"{ratio:.2f}x"
        aims.append((label, figure, ratio <= bound if below else ratio >= bound, note))

    for s in stores:
        # One process (one GIL) answers 8 requests at once in at least 8 x its CPU per
        # request: a p50 near that waits for the CPU, above it behind something else.
        note = f"  (8 x its CPU per request: {8 * eight[s].cpu_per_request / 1000:.1f} ms)"
        aim(
            f"{s}: p50 at 8 connections / 1 alone <= 2.5",
            eight[s].p50 / one[s].p50,
            2.5,
            below=True,
            note=note,
        )
    # The same 8 connections on one replica of WORKERS processes (one per core).
    workers = best(runs[f"sqlite, {WORKERS} workers"])
    floor = 8 / WORKERS * workers.cpu_per_request / 1000
    aim(
        f"sqlite, {WORKERS} workers: p50 at 8 connections / 1 alone <= 2.5",
        workers.p50 / one["sqlite"].p50,
        2.5,
        below=True,
        note=f"  (8 / {WORKERS} x its CPU per request: {floor:.1f} ms)",
    )
    aim("sqlite: 2 replicas / 1, throughput >= 1.0", two["sqlite"].rps / eight["sqlite"].rps, 1.0)
    aim(
        "sqlite: 2 replicas / 1, p99 <= 1.5",
        # Each side's least disturbed round by its p99, not the round of its best rate.
        min(r.p99 for r in runs["sqlite, 2 replicas"])
        / min(r.p99 for r in runs["sqlite, 8 connections"]),
        1.5,
        below=True,
    )
    if postgres:
        use = eight["postgres"].utilisation
        note = f"  (one replica used {use:.2f} of a core; the machine has {os.cpu_count()})"
        ratio = two["postgres"].rps / eight["postgres"].rps
        aim("postgres: 2 replicas / 1, throughput >= 1.8", ratio, 1.8, note=note)
        cpu = eight["postgres"].cpu_per_request / eight["sqlite"].cpu_per_request
        aim("postgres / sqlite, service CPU per request <= 1.3", cpu, 1.3, below=True)
    aim("service / bare keeping the same record >= 90%", eight["sqlite"].rps / bare.rps, 0.9)
    return aims


if __name__ == "__main__":
    main()
