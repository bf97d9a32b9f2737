"""A throwaway PostgreSQL server for tests and benchmarks: started, faulted, stopped here.

:class:`TemporaryPostgres` runs the server binaries of the machine (Debian's
``postgresql`` package puts them in ``/usr/lib/postgresql/<major>/bin``) on a fresh data
directory under a temporary folder, listening on a free port on 127.0.0.1 only (no Unix
socket), with ``trust`` authentication for loopback connections. As root it runs the
server as an unprivileged user (``postgres``, else ``nobody``), as PostgreSQL requires.
Nothing here imports a database driver.

The fault controls are the ones an operator meets: :meth:`~TemporaryPostgres.kill` (the
postmaster dies with SIGKILL, as in a crash or a failover), :meth:`~TemporaryPostgres.stop`,
:meth:`~TemporaryPostgres.start` (on the same port and data, as a restarted or promoted
server would come back).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from jevqueue.errors import ConfigurationError

__all__ = ["TemporaryPostgres", "find_postgres_bindir"]

_BINDIR_VARIABLE = "JEVQUEUE_PG_BINDIR"


def find_postgres_bindir() -> Path | None:
    """Return the directory holding ``initdb``, ``pg_ctl`` and ``postgres``, or ``None``.

    ``$JEVQUEUE_PG_BINDIR`` wins; then the newest ``/usr/lib/postgresql/*/bin``; then
    ``initdb`` on ``PATH`` (followed through links).
    """
    candidates: list[Path] = []
    configured = os.environ.get(_BINDIR_VARIABLE)
    if configured:
        candidates.append(Path(configured))
    debian = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda path: int(Path(path).parent.name) if Path(path).parent.name.isdigit() else 0,
        reverse=True,
    )
    candidates.extend(Path(path) for path in debian)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(os.path.realpath(on_path)).parent)
    for directory in candidates:
        if all((directory / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return directory
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _server_user() -> str | None:
    """The unprivileged account to run the server as when we are root, else ``None``."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise ConfigurationError(
        "running as root, but neither a 'postgres' nor a 'nobody' account exists to run "
        "PostgreSQL as; create one (useradd postgres) or run as an unprivileged user"
    )


class TemporaryPostgres:
    """A PostgreSQL server on a throwaway data directory and a free loopback port.

    Args:
        base_dir: where to put the data directory (a new temporary folder when ``None``).
            As root, the server's account must be able to enter every folder above it:
            pytest's private temporary folders will not do.
        bindir: the server binaries (found with :func:`find_postgres_bindir` when ``None``).
        settings: extra ``postgresql.conf`` settings, written before the first start.

    Raises:
        ConfigurationError: no PostgreSQL server binaries were found, or ``initdb`` failed.
    """

    def __init__(
        self,
        base_dir: str | os.PathLike[str] | None = None,
        *,
        bindir: str | os.PathLike[str] | None = None,
        settings: dict[str, str] | None = None,
    ) -> None:
        found = Path(bindir) if bindir is not None else find_postgres_bindir()
        if found is None:
            raise ConfigurationError(
                "no PostgreSQL server binaries (initdb, pg_ctl, postgres) were found: install "
                "Debian's package (apt-get install postgresql) or set JEVQUEUE_PG_BINDIR"
            )
        self.bindir = found
        self._owned_base = base_dir is None
        self.base = (
            Path(tempfile.mkdtemp(prefix="jevqueue-pg-")) if base_dir is None else Path(base_dir)
        )
        self.base.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.base / "data"
        self.log_file = self.base / "server.log"
        self.port = _free_port()
        self.user = _server_user()
        if self.user is not None:
            # The server's account must reach its data directory through the temp folder.
            os.chmod(self.base, 0o755)
        self._initdb(settings or {})

    @classmethod
    def standby_of(cls, primary: TemporaryPostgres) -> TemporaryPostgres:
        """A streaming-replication standby of ``primary`` (a base backup of it), not started.

        :meth:`promote` turns it into a primary, as a failover does.

        Raises:
            ConfigurationError: the base backup failed.
        """
        standby = cls.__new__(cls)
        standby.bindir = primary.bindir
        standby._owned_base = True
        standby.base = Path(tempfile.mkdtemp(prefix="jevqueue-pg-standby-"))
        standby.data_dir = standby.base / "data"
        standby.log_file = standby.base / "server.log"
        standby.port = _free_port()
        standby.user = primary.user
        if standby.user is not None:
            os.chmod(standby.base, 0o755)
        standby.data_dir.mkdir(mode=0o700)
        standby.log_file.touch()
        if standby.user is not None:
            account = pwd.getpwnam(standby.user)
            for path in (standby.data_dir, standby.log_file):
                os.chown(path, account.pw_uid, account.pw_gid)
        standby._run(
            "pg_basebackup",
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            "postgres",
            "-D",
            str(standby.data_dir),
            "-R",
            "-X",
            "stream",
            "--no-sync",
        )
        with (standby.data_dir / "postgresql.conf").open("a", encoding="utf-8") as handle:
            handle.write(f"port = {standby.port}\n")  # the last setting wins
        return standby

    def promote(self) -> None:
        """Promote a standby to a primary and wait until it accepts writes."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-w", "promote")

    @property
    def url(self) -> str:
        """A libpq connection string for the ``postgres`` database as superuser."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, check: bool = True, timeout: float = 120) -> str:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=self.base
        )
        if check and done.returncode != 0:
            raise ConfigurationError(
                f"{args[0]} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}"
            )
        return done.stdout

    def _initdb(self, settings: dict[str, str]) -> None:
        self.data_dir.mkdir()
        self.log_file.touch()
        if self.user is not None:
            account = pwd.getpwnam(self.user)
            for path in (self.data_dir, self.log_file):
                os.chown(path, account.pw_uid, account.pw_gid)
        self._run(
            "initdb",
            "-D",
            str(self.data_dir),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        conf = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": "''",
            "max_connections": "200",
            "fsync": "on",
            "synchronous_commit": "on",
            "log_min_messages": "warning",
            **settings,
        }
        with (self.data_dir / "postgresql.conf").open("a", encoding="utf-8") as handle:
            handle.write("\n# jevqueue test server\n")
            for key, value in conf.items():
                handle.write(f"{key} = {value}\n")

    def start(self, *, timeout: float = 60) -> None:
        """Start the server (again) on the same data directory and port; wait until ready."""
        self._run(
            "pg_ctl",
            "-D",
            str(self.data_dir),
            "-l",
            str(self.log_file),
            "-w",
            "-t",
            str(int(timeout)),
            "start",
            timeout=timeout + 10,
        )
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                        return
                except OSError:
                    time.sleep(0.05)
            raise ConfigurationError(f"PostgreSQL did not accept connections on port {self.port}")
        except BaseException:  # never leave a server running that nobody will stop
            self.stop("immediate")
            raise

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: roll back open transactions and disconnect)."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "stop", check=False)

    def postmaster_pid(self) -> int | None:
        """The postmaster's process id, or ``None`` when the server is not running."""
        try:
            first = (self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0]
        except (FileNotFoundError, PermissionError):
            return None
        return int(first) if first.strip().isdigit() else None

    def kill(self) -> None:
        """Kill the postmaster and its backends with SIGKILL, as a crash would."""
        pid = self.postmaster_pid()
        if pid is None:
            return
        try:
            group = os.getpgid(pid)
            # pg_ctl starts the postmaster in a session of its own: its group is the server
            # and its backends. Never signal our own group.
            if group != os.getpgrp():
                os.killpg(group, signal.SIGKILL)
            else:  # pragma: no cover - a server started some other way
                os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        # Backends notice the postmaster's death by themselves; give them a moment.
        time.sleep(0.2)

    def running(self) -> bool:
        """Whether the server accepts TCP connections right now."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def close(self) -> None:
        """Stop the server and remove its data directory."""
        self.stop("immediate")
        if self._owned_base:
            shutil.rmtree(self.base, ignore_errors=True)
        else:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> TemporaryPostgres:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
