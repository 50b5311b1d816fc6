"""A private PostgreSQL: initdb and pg_ctl in a temporary folder (the shared store's tests
and bench/shared_store.py).

PostgreSQL refuses to run as root, so when run as root the cluster belongs to an
unprivileged user (``nobody``) and its programs run through ``runuser``. The server
listens on a Unix socket in the cluster's folder and on a free loopback port; clients
connect as the cluster's superuser ``textnb`` (trust authentication: nothing but this
machine's processes can reach it).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


BIN_DIRS = ["/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin",
            "/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/14/bin"]
NEEDS = ("PostgreSQL and psycopg 3: apt-get install postgresql && "
         "pip install -e '.[postgresql]'")


def pg_bin() -> Path | None:
    for folder in BIN_DIRS:
        if Path(folder, "initdb").exists():
            return Path(folder)
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def skip_reason() -> str | None:
    """Why the shared store's tests cannot run here, or None."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return f"psycopg 3 is not installed; {NEEDS}"
    if pg_bin() is None:
        return f"no initdb found; {NEEDS}"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser to start PostgreSQL as another user"
    return None


class Cluster:
    """A PostgreSQL cluster of its own: ``start``, ``stop`` (fast or immediate), ``url``."""

    def __init__(self):
        self.bin = pg_bin()
        self.folder = Path(tempfile.mkdtemp(prefix="textnb-pg-"))
        self.data = self.folder / "data"
        self.port = free_port()
        self.user = "nobody" if os.geteuid() == 0 else None
        if self.user:
            entry = pwd.getpwnam(self.user)
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
        os.chmod(self.folder, 0o700)
        self._run("initdb", "-D", str(self.data), "-U", "textnb", "-A", "trust",
                  "--no-sync", "-E", "UTF8", "--locale=C")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                       f"unix_socket_directories = '{self.folder}'\n"
                       "max_connections = 60\nshared_buffers = 32MB\n")

    def _run(self, program: str, *args: str, check: bool = True):
        command = [str(self.bin / program), *args]
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        return subprocess.run(command, check=check, capture_output=True, text=True,
                              cwd=self.folder)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://textnb@/{database}?host={self.folder}&port={self.port}"

    def tcp_url(self, database: str = "postgres") -> str:
        return f"postgresql://textnb@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "log"), "-w",
                  "-t", "30", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)
