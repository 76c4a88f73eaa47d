"""A throwaway PostgreSQL cluster on loopback for tests that need the second backend.

Uses the Debian PostgreSQL 15 binaries. initdb refuses to run as root, so as root the cluster is
created and run as the 'postgres' system user.
"""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from tests.ports import free_port

PG_BIN_DIRS = ["/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"]


def pg_bin(name: str) -> str | None:
    for directory in PG_BIN_DIRS:
        candidate = Path(directory) / name
        if candidate.exists():
            return str(candidate)
    return shutil.which(name)


def available() -> bool:
    return pg_bin("initdb") is not None and pg_bin("pg_ctl") is not None


def require_binaries() -> None:
    """Fails a PostgreSQL test where the server binaries are missing: a missing backend never passes silently."""
    import pytest
    if not available():
        pytest.fail("PostgreSQL server binaries not found: apt-get install postgresql-15 (bash .ci/run does)")


class PostgresCluster:
    def __init__(self, shared: str | None = None, owned: bool | None = None) -> None:
        """A new cluster (`start()` it), or `shared`, one another process started ("DIR:PORT", as `describe`
        prints): scripts/mutation.sh starts one for a whole run rather than one per mutant. A cluster stops
        itself only when `owned` (by default: when not shared); otherwise only its databases go."""
        if shared is None:
            self.dir, self.port = Path(tempfile.mkdtemp(prefix="coord-pg-")), free_port()
        else:
            directory, port = shared.rsplit(":", 1)
            self.dir, self.port = Path(directory), int(port)
        self.data = self.dir / "data"
        self.run_as = "postgres" if os.geteuid() == 0 else None
        self.owned = shared is None if owned is None else owned
        self.created: list[str] = []

    def describe(self) -> str:
        return f"{self.dir}:{self.port}"

    def _cmd(self, *args: str) -> list[str]:
        return ["runuser", "-u", self.run_as, "--", *args] if self.run_as else list(args)

    def start(self) -> "PostgresCluster":
        if self.run_as:
            user = pwd.getpwnam(self.run_as)
            os.chown(self.dir, user.pw_uid, user.pw_gid)
        subprocess.run(self._cmd(pg_bin("initdb"), "-D", str(self.data), "-U", "coord", "--auth=trust",
                                 "-E", "UTF8", "--no-sync"), check=True, capture_output=True)
        self._start_server()
        return self

    def _start_server(self) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off " \
                  f"-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        subprocess.run(self._cmd(pg_bin("pg_ctl"), "-D", str(self.data), "-o", options, "-w", "-l",
                                 str(self.dir / "log"), "start"), check=True, capture_output=True)

    def create_database(self) -> str:
        """A fresh database; returns its URL."""
        name = "t_" + uuid.uuid4().hex[:12]
        self._admin(f"CREATE DATABASE {name}")
        self.created.append(name)
        return f"postgresql://coord@127.0.0.1:{self.port}/{name}"

    def _admin(self, *statements: str) -> None:
        import psycopg2
        for _ in range(50):
            try:
                conn = psycopg2.connect(host="127.0.0.1", port=self.port, user="coord", dbname="postgres")
                break
            except psycopg2.OperationalError:
                time.sleep(0.1)
        conn.autocommit = True
        with conn.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
        conn.close()

    def restart(self) -> None:
        """Stop the server (fast: every session is cut off, as in a failover) and start it again."""
        subprocess.run(self._cmd(pg_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"),
                       check=True, capture_output=True)
        self._start_server()

    def stop(self) -> None:
        if not self.owned:  # a shared cluster outlives this session: only its databases go
            self._admin(*(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)" for name in self.created))
            return
        subprocess.run(self._cmd(pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"),
                       capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)
