"""A private, throwaway PostgreSQL cluster for fault tests.

Fault tests stop the server in the middle of an operation. They must never stop the
machine's shared server (other tests run against it), so each gets its own cluster:
``initdb`` into a temporary folder, ``pg_ctl start`` on a free port with the socket in
that folder, ``pg_ctl stop -m immediate`` to simulate a crash, and a finalizer that
stops the server and removes the folder whatever happens.

When the tests run as root, the PostgreSQL binaries are run as the ``postgres`` OS user
(``runuser -u postgres --``): the server refuses to run as root.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def find_bindir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, or None when PostgreSQL is not installed."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    found = shutil.which("initdb")
    if found:
        candidates.append(found)
    for initdb in candidates:
        bindir = Path(initdb).parent
        if (bindir / "pg_ctl").exists():
            return bindir
    return None


def unavailable_reason() -> str | None:
    """Why a private cluster cannot be started here, or None when it can."""
    if find_bindir() is None:
        return "initdb/pg_ctl not found (PostgreSQL server binaries are not installed)"
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            return "running as root and runuser is missing: cannot start PostgreSQL as non-root"
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' OS user to run the server"
    return None


def free_port() -> int:
    """A TCP port nobody listens on right now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateCluster:
    """One PostgreSQL cluster in its own folder, on its own port."""

    def __init__(self) -> None:
        bindir = find_bindir()
        if bindir is None:  # pragma: no cover - callers check unavailable_reason() first
            raise RuntimeError("PostgreSQL server binaries not found")
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="symfonic-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            entry = pwd.getpwnam("postgres")
            os.chown(self.root, entry.pw_uid, entry.pw_gid)

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(
            command, check=check, capture_output=True, text=True, timeout=120
        )

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")

    def start(self) -> None:
        # fsync off: the tests crash the server, never the machine, so the OS cache holds
        # every committed write; it spares a data-directory sync on each restart.
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        )
        result = self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start",
            check=False,
        )
        if result.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {result.stderr}\n{log}")

    def crash(self) -> None:
        """Stop the server like a power cut: ``-m immediate`` (no checkpoint, WAL replay on start)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def is_running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def destroy(self) -> None:
        """Stop the server if it runs and remove the folder; safe to call twice."""
        try:
            if self.data.exists() and self.is_running():
                self.crash()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
