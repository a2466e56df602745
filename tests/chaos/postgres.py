"""A PostgreSQL cluster of the test's own, on a free port, that a test may restart, stop,
kill or cut off under the relay:

    with private_postgres(var_dir) as server:
        server.url("chaos")          # postgres://postgres@127.0.0.1:<port>/chaos (created)
        server.restart()             # pg_ctl restart -m fast
        server.kill()                # kill -9 of the postmaster; server.start() brings it back
        server.stop(); server.start()
        server.terminate_backends("chaos")   # pg_terminate_backend of every other session

The server binaries come from the installed PostgreSQL (``/usr/lib/postgresql/<n>/bin``,
``scripts/ensure-postgres`` installs them on Debian). ``initdb`` refuses to run as root, so as
root the cluster belongs to the ``postgres`` user and every server command runs through
``runuser -u postgres``. Raises ServiceMissingError when the binaries or that user are missing
(the caller skips). Trust authentication on 127.0.0.1 only. fsync is off (only a crash of
the machine would need it) but commits stay synchronous: with ``synchronous_commit=off`` a
``kill -9`` of the postmaster loses the last commits the relay was told were written.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.live import ServiceMissingError, free_port, wait_for

SERVER_USER = "postgres"
START_SECONDS = 60


def server_binaries() -> Path:
    """The newest installed server's bin directory; ServiceMissingError when there is none."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda path: int(path.parent.parent.name) if path.parent.parent.name.isdigit() else 0,
    )
    if not found:
        raise ServiceMissingError(
            "the PostgreSQL server binaries (initdb, pg_ctl) are not installed under "
            "/usr/lib/postgresql/*/bin: run scripts/ensure-postgres as root on Debian"
        )
    return found[-1].parent


@dataclass
class PrivatePostgres:
    bin_dir: Path
    data_dir: Path
    log: Path
    port: int
    as_user: list[str]

    def _run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*self.as_user, str(self.bin_dir / command[0]), *command[1:]],
            check=check,
            capture_output=True,
            text=True,
            timeout=START_SECONDS,
        )

    def url(self, database: str = "postgres") -> str:
        return f"postgres://{SERVER_USER}@127.0.0.1:{self.port}/{database}"

    def _pg_ctl(self, action: str, *extra: str) -> None:
        options = (
            f"-p {self.port} -k {self.data_dir} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(
            "pg_ctl", action, "-D", str(self.data_dir), "-l", str(self.log), "-w",
            "-t", str(START_SECONDS), "-o", options, *extra,
        )  # fmt: skip

    def start(self) -> None:
        # After a kill -9 the orphaned backends leave within moments; until then the server
        # refuses to start on their shared memory, so try again for a while.
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                self._pg_ctl("start")
                break
            except subprocess.CalledProcessError as error:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"pg_ctl start failed: {error.stderr}") from error
                time.sleep(0.5)
        wait_for(self.answers, f"PostgreSQL answering on port {self.port}", timeout=START_SECONDS)

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: every session cut, the server back within a second."""
        self._pg_ctl("restart", "-m", "fast")

    def stop(self) -> None:
        self._run("pg_ctl", "stop", "-D", str(self.data_dir), "-m", "fast", "-w", check=False)

    def postmaster_pid(self) -> int:
        return int((self.data_dir / "postmaster.pid").read_text().splitlines()[0])

    def kill(self) -> int:
        """``kill -9`` of the postmaster; returns its pid. Its backends notice and leave."""
        pid = self.postmaster_pid()
        os.kill(pid, signal.SIGKILL)
        return pid

    def answers(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.url(), connect_timeout=1) as db:
                db.execute("select 1")
            return True
        except psycopg.OperationalError:
            return False

    def execute(self, sql: str, params=None, database: str = "postgres") -> list[tuple]:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True, connect_timeout=5) as db:
            cursor = db.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    def terminate_backends(self, database: str) -> int:
        """``pg_terminate_backend`` of every session on ``database`` but this one; returns
        how many were cut."""
        rows = self.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity "
            "where datname = %s and pid <> pg_backend_pid()",
            [database],
        )
        return sum(1 for (cut,) in rows if cut)

    @contextmanager
    def database(self, name: str) -> Iterator[tuple[str, str]]:
        """A new database on this server: yields (its name, its URL), as
        ``tests.live.postgres_database`` does for the shared server."""
        self.execute(f'CREATE DATABASE "{name}"')
        yield name, self.url(name)


@contextmanager
def private_postgres(var_dir: Path) -> Iterator[PrivatePostgres]:
    """A new cluster, started; stopped and deleted when the block ends."""
    bin_dir = server_binaries()
    as_user: list[str] = []
    data_root = Path(tempfile.mkdtemp(prefix="chaos-postgres-"))
    if os.geteuid() == 0:
        try:
            account = pwd.getpwnam(SERVER_USER)
        except KeyError:
            shutil.rmtree(data_root, ignore_errors=True)
            raise ServiceMissingError(
                f"running as root, and there is no {SERVER_USER!r} user to own a cluster"
            ) from None
        if not shutil.which("runuser"):
            raise ServiceMissingError("running as root, and runuser is missing")
        os.chown(data_root, account.pw_uid, account.pw_gid)
        as_user = ["runuser", "-u", SERVER_USER, "--"]
    server = PrivatePostgres(
        bin_dir=bin_dir,
        data_dir=data_root / "data",
        log=data_root / "postgres.log",
        port=free_port(),
        as_user=as_user,
    )
    try:
        server._run(
            "initdb", "-D", str(server.data_dir), "-U", SERVER_USER, "-A", "trust",
            "--no-sync", "-E", "UTF8",
        )  # fmt: skip
        server.start()
        yield server
    finally:
        server.stop()
        if server.log.exists():
            shutil.copy(server.log, var_dir / "postgres.log")
        shutil.rmtree(data_root, ignore_errors=True)
