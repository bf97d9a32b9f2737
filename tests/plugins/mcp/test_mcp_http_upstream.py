"""An upstream over streamable HTTP (``--upstream-url``): the reference server on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import anyio
import pytest
from conftest import REFERENCE_SERVER, ProxySetup
from proxy_client import proxy_client


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(REFERENCE_SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ},
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError("the HTTP reference server did not start") from None
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(timeout=10)


@pytest.mark.network_allowed
def test_a_remote_upstream_is_judged_the_same_way(ref_proxy: ProxySetup, http_server: str) -> None:
    outside = ref_proxy.workspace.parent / "outside.txt"

    async def scenario() -> None:
        command = ref_proxy.command([], url=http_server)
        async with proxy_client(command, ref_proxy.env) as client:
            assert client.server_name == "jevqueue-reference"
            assert sorted(await client.list_tools()) == ["crash", "echo", "write_note"]
            inside = await client.call("write_note", {"path": "remote.txt", "text": "via http"})
            assert not inside.is_error, inside.text
            denied = await client.call("write_note", {"path": str(outside), "text": "x"})
            assert denied.is_error and "outside the workspace" in denied.text

    anyio.run(scenario)
    assert (ref_proxy.workspace / "remote.txt").read_text() == "via http"
    assert not outside.exists()
