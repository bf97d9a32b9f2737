"""The latency ``jevqueue mcp-proxy`` adds to one ``tools/call``, against the same call direct.

Two real MCP client sessions over stdio, both open for the whole run, against the same
upstream: ``@modelcontextprotocol/server-filesystem`` (from ``.npm-tools/``, as
``make test`` installs it) rooted at a temporary workspace.

* **direct** (the peer, ungoverned): client -> filesystem server.
* **proxied**: client -> ``jevqueue mcp-proxy`` (durable ``SQLiteAuditLog``, default
  policy, a tools file) -> filesystem server.

Each round makes the same calls through both sessions, interleaved call by call
(direct, proxied, direct, ...), so a slow moment of the machine hits both alike:
``read_text_file`` of a small file (ALLOW) and ``write_file`` of 1 KB inside the
workspace (ALLOW, a file write). Wall time per call is ``time.perf_counter_ns`` around the
client's ``call_tool``. Per round: the median of each side and their difference; reported:
the median over rounds and the range. Beside it, the proxy process's own CPU time per
call (user + system, from ``/proc``): on a loaded machine the wall-clock difference is
mostly waiting for a CPU at each of the two extra hops, while the CPU time is the work
the proxy itself does. The machine's load average is printed first and last.

Usage::

    python bench/mcp.py             # 7 rounds of 300 calls per side
    python bench/mcp.py --quick     # 5 rounds of 60

Target: under 1 ms median added per call.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

# This file is named after what it measures, which is also the SDK's import name: run as a
# script, its own folder comes first on sys.path and would shadow the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import anyio  # noqa: E402
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FILESYSTEM = ROOT / ".npm-tools" / "node_modules" / ".bin" / "mcp-server-filesystem"
JEVQUEUE = Path(sys.executable).parent / "jevqueue"
TOOLS = """
[[tool]]
name = "read_text_file"
side_effects = ["file_read"]
path_fields = ["path"]

[[tool]]
name = "write_file"
side_effects = ["file_write"]
path_fields = ["path"]
content_fields = ["content"]
"""


def _proxy_pid() -> int | None:
    """The ``jevqueue mcp-proxy`` child of this process (Linux ``/proc``), if found."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and b"mcp-proxy" in cmdline:
            return int(entry.name)
    return None


def _cpu_seconds(pid: int | None) -> float:
    """User plus system CPU time of ``pid`` so far (``nan`` where ``/proc`` is not there)."""
    if pid is None:
        return float("nan")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} CPUs"


async def _timed(session: ClientSession, name: str, arguments: dict[str, str]) -> int:
    start = time.perf_counter_ns()
    result = await session.call_tool(name, arguments)
    elapsed = time.perf_counter_ns() - start
    if result.isError:
        raise SystemExit(f"{name} failed: {result.content}")
    return elapsed


async def _run(rounds: int, calls: int, base: Path) -> None:
    workspace = base / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("a small file\n" * 20)
    tools = base / "tools.toml"
    tools.write_text(TOOLS)
    env = {"JEVQUEUE_STATE_DIR": str(base / "state"), "PATH": os.environ.get("PATH", "")}
    direct = StdioServerParameters(command=str(FILESYSTEM), args=[str(workspace)])
    proxied = StdioServerParameters(
        command=str(JEVQUEUE),
        args=[
            "mcp-proxy",
            "--tools",
            str(tools),
            "--audit",
            str(base / "audit.sqlite3"),
            "--task-id",
            "bench",
            "--actor-id",
            "bench-agent",
            "--workspace",
            str(workspace),
            "--git-sha",
            "0123456789abcdef0123456789abcdef01234567",
            "--",
            str(FILESYSTEM),
            str(workspace),
        ],
        env=env,
    )
    payload = "x" * 1024
    calls_to_make = [
        ("read_text_file", {"path": str(workspace / "notes.txt")}),
        ("write_file", {"path": str(workspace / "out.txt"), "content": payload}),
    ]
    async with (
        stdio_client(direct, errlog=open(os.devnull, "w")) as (dr, dw),
        ClientSession(dr, dw) as direct_session,
        stdio_client(proxied, errlog=open(os.devnull, "w")) as (pr, pw),
        ClientSession(pr, pw) as proxy_session,
    ):
        await direct_session.initialize()
        await proxy_session.initialize()
        for name, arguments in calls_to_make:  # warm both paths once
            await _timed(direct_session, name, arguments)
            await _timed(proxy_session, name, arguments)
        print(_load())
        print(f"{rounds} rounds x {calls} calls per side, interleaved call by call\n")
        print("round  call             direct median  proxied median  added     proxy CPU/call")
        added_by_call: dict[str, list[float]] = {name: [] for name, _ in calls_to_make}
        cpu_by_call: dict[str, list[float]] = {name: [] for name, _ in calls_to_make}
        pid = _proxy_pid()
        for round_index in range(rounds):
            for name, arguments in calls_to_make:
                direct_ns: list[int] = []
                proxy_ns: list[int] = []
                cpu_before = _cpu_seconds(pid)
                for _ in range(calls):
                    direct_ns.append(await _timed(direct_session, name, arguments))
                    proxy_ns.append(await _timed(proxy_session, name, arguments))
                cpu = (_cpu_seconds(pid) - cpu_before) / calls * 1e3
                d = statistics.median(direct_ns) / 1e6
                p = statistics.median(proxy_ns) / 1e6
                added_by_call[name].append(p - d)
                cpu_by_call[name].append(cpu)
                print(
                    f"{round_index + 1:5}  {name:15}  {d:10.3f} ms  {p:11.3f} ms  {p - d:6.3f} ms"
                    f"  {cpu:6.3f} ms"
                )
        print()
        for name, added in added_by_call.items():
            cpu = cpu_by_call[name]
            print(
                f"{name:15} added per call: median {statistics.median(added):.3f} ms "
                f"(rounds {min(added):.3f}-{max(added):.3f} ms); proxy CPU per call: median "
                f"{statistics.median(cpu):.3f} ms (rounds {min(cpu):.3f}-{max(cpu):.3f} ms)"
            )
        print(_load())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 rounds of 60 calls")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--calls", type=int, default=None)
    options = parser.parse_args()
    rounds = options.rounds or (5 if options.quick else 7)
    calls = options.calls or (60 if options.quick else 300)
    if rounds < 5:
        raise SystemExit("--rounds must be at least 5: fewer say nothing about the spread")
    if not FILESYSTEM.exists():
        raise SystemExit(f"{FILESYSTEM} is missing: run `make test` first (it installs it)")
    with tempfile.TemporaryDirectory() as base:
        anyio.run(_run, rounds, calls, Path(base))


if __name__ == "__main__":
    main()
