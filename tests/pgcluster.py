"""A private, throwaway PostgreSQL cluster for fault tests.

Fault tests stop the server in the middle of an operation. They must never stop the
machine's shared server (other tests run against it), so each gets its own cluster:
``initdb`` into a temporary folder, ``pg_ctl start`` on a free port with the socket in
that folder, ``pg_ctl stop -m immediate`` to simulate a crash, and a finalizer that
stops the server and removes the folder whatever happens. A failover test makes a
second cluster as a streaming standby of the first (:meth:`PrivateCluster.clone_from`:
``pg_basebackup -R``), kills the first with SIGKILL (:meth:`PrivateCluster.kill`) and
promotes the standby (:meth:`PrivateCluster.promote`).

When the tests run as root, the PostgreSQL binaries are run as the ``postgres`` OS user
(``runuser -u postgres --``): the server refuses to run as root.
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
        self._killed = False
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

    def clone_from(self, primary: PrivateCluster, *, name: str) -> None:
        """Make this cluster a streaming standby of ``primary`` (instead of :meth:`init`):
        ``pg_basebackup -R`` writes ``primary_conninfo`` naming it ``name``, the name the
        primary's ``synchronous_standby_names`` waits for."""
        conninfo = f"host=127.0.0.1 port={primary.port} user=postgres application_name={name}"
        self._run("pg_basebackup", "-D", str(self.data), "-d", conninfo, "-R", "-X", "stream", "--no-sync")

    def start(self, *settings: str) -> None:
        """Start the server; ``settings`` are more ``name=value`` for its command line
        (they stay this server's: a standby cloned from it does not inherit them)."""
        # fsync off: the tests crash the server, never the machine, so the OS cache holds
        # every committed write; it spares a data-directory sync on each restart.
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
            + "".join(f" -c {setting}" for setting in settings)
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

    def kill(self) -> None:
        """Lose the server like its machine: SIGKILL to the postmaster and every process
        it started, at once (no process gets to send anything more), then its leftover
        shared memory segment removed."""
        lines = (self.data / "postmaster.pid").read_text().splitlines()
        postmaster = int(lines[0])
        # Stopped first, the postmaster forks no backend between the listing and the kill.
        os.kill(postmaster, signal.SIGSTOP)
        children = [
            int(stat.parent.name)
            for stat in Path("/proc").glob("[0-9]*/stat")
            if _parent_pid(stat) == postmaster
        ]
        for pid in [postmaster, *children]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in [postmaster, *children]):
            if time.monotonic() > deadline:
                raise RuntimeError("the killed server's processes did not end in 30 s")
            time.sleep(0.02)  # sleep-ok: polling for the kernel to end the killed processes
        self._killed = True  # its pid may stay a zombie a while: pg_ctl would call it running
        shm = lines[6].split() if len(lines) > 6 else []
        if len(shm) == 2:
            subprocess.run(["ipcrm", "-m", shm[1]], capture_output=True, timeout=30, check=False)

    def promote(self) -> None:
        """End a standby's recovery: it becomes a primary (``pg_ctl promote``, waiting)."""
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "promote")

    def is_running(self) -> bool:
        if self._killed:
            return False
        return self._run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def destroy(self) -> None:
        """Stop the server if it runs and remove the folder; safe to call twice."""
        try:
            if self.data.exists() and self.is_running():
                self.crash()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _parent_pid(stat: Path) -> int | None:
    try:
        # The command name, in parentheses, may hold spaces: the fields after its end.
        return int(stat.read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None  # the process ended meanwhile


def _alive(pid: int) -> bool:
    """The process runs (a zombie, ended but not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
