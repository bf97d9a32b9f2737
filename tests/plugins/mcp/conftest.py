"""Fixtures for the MCP proxy tests: a workspace, tools files, and the proxy's command line.

The upstreams are real servers: ``@modelcontextprotocol/server-filesystem`` (npm, under
``.npm-tools/``), ``mcp-server-time`` (PyPI, in ``.venv-mcp2/``) and the Python reference
server beside these tests. ``make test`` installs all of them; when one is missing the
test fails and says how to install it (nothing is skipped silently).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason='the MCP tests need the mcp extra: pip install "jevqueue[mcp]"')

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
FILESYSTEM_SERVER = ROOT / ".npm-tools" / "node_modules" / ".bin" / "mcp-server-filesystem"
PYTHON_SERVERS = ROOT / ".venv-mcp2" / "bin"
REFERENCE_SERVER = HERE / "reference_server.py"
GIT_SHA = "0123456789abcdef0123456789abcdef01234567"

FILESYSTEM_TOOLS = """
[[tool]]
name = "write_file"
side_effects = ["file_write"]
path_fields = ["path"]
content_fields = ["content"]

[[tool]]
name = "read_text_file"
side_effects = ["file_read"]
path_fields = ["path"]

[[tool]]
name = "list_allowed_directories"
side_effects = []
"""

REFERENCE_TOOLS = """
[[tool]]
name = "write_note"
side_effects = ["file_write"]
path_fields = ["path"]
content_fields = ["text"]

[[tool]]
name = "echo"
side_effects = []

[[tool]]
name = "crash"
side_effects = []

[[tool]]
name = "wipe"
side_effects = ["file_read"]
path_fields = ["path"]
"""


def jevqueue_command() -> str:
    """The ``jevqueue`` script of the running interpreter's environment."""
    return str(Path(sys.executable).parent / "jevqueue")


def filesystem_server() -> str:
    if not FILESYSTEM_SERVER.exists():
        pytest.fail(
            f"{FILESYSTEM_SERVER} is missing: run `make test`, or `npm install --prefix "
            ".npm-tools @modelcontextprotocol/server-filesystem`"
        )
    return str(FILESYSTEM_SERVER)


def python_server(name: str) -> str:
    path = PYTHON_SERVERS / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make test` (it builds .venv-mcp2 with {name})")
    return str(path)


@dataclass
class ProxySetup:
    """One proxy configuration: where things are, and its command line."""

    workspace: Path
    tools_file: Path
    audit: Path
    state: Path
    approvals: Path

    @property
    def env(self) -> dict[str, str]:
        return {"JEVQUEUE_STATE_DIR": str(self.state), "PATH": os.environ.get("PATH", "")}

    def command(self, upstream: Sequence[str], *extra: str, url: str | None = None) -> list[str]:
        base = [
            jevqueue_command(),
            "mcp-proxy",
            "--tools",
            str(self.tools_file),
            "--audit",
            str(self.audit),
            "--task-id",
            "task-42",
            "--actor-id",
            "coding-agent",
            "--workspace",
            str(self.workspace),
            "--git-sha",
            GIT_SHA,
            *extra,
        ]
        if url is not None:
            return [*base, "--upstream-url", url]
        return [*base, "--", *upstream]

    def filesystem(self, *extra: str) -> list[str]:
        return self.command([filesystem_server(), str(self.workspace)], *extra)

    def reference(self, *extra: str) -> list[str]:
        return self.command([sys.executable, str(REFERENCE_SERVER)], *extra)

    def audit_verify(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [jevqueue_command(), "audit", "verify", "--json", str(self.audit)],
            capture_output=True,
            text=True,
            check=False,
        )


def _setup(tmp_path: Path, tools: str) -> ProxySetup:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / ".git").mkdir()
    tools_file = tmp_path / "tools.toml"
    tools_file.write_text(tools, encoding="utf-8")
    approvals = tmp_path / "approvals"
    approvals.mkdir()
    state = tmp_path / "state"
    state.mkdir()
    return ProxySetup(workspace, tools_file, tmp_path / "audit.sqlite3", state, approvals)


@pytest.fixture
def fs_proxy(tmp_path: Path) -> ProxySetup:
    """A proxy in front of the npm filesystem server, rooted at the workspace."""
    return _setup(tmp_path, FILESYSTEM_TOOLS)


@pytest.fixture
def ref_proxy(tmp_path: Path) -> ProxySetup:
    """A proxy in front of the Python reference server."""
    return _setup(tmp_path, REFERENCE_TOOLS)
