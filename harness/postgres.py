"""A throwaway PostgreSQL server on a loopback port: ``initdb`` into a temporary directory, ``pg_ctl`` start/stop.

Debian's ``postgresql`` package puts the binaries in /usr/lib/postgresql/<version>/bin (not on PATH);
``POSTGRES_BIN`` names another folder. PostgreSQL refuses to run as root: run as root (a CI container),
the server runs as the ``postgres`` user the package creates, in a directory it owns.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from harness.prometheus import free_port

DATABASE = "archive"


def bin_dir() -> Path:
    """The folder of initdb and pg_ctl: ``POSTGRES_BIN``, PATH, or the newest of Debian's."""
    if os.environ.get("POSTGRES_BIN"):
        return Path(os.environ["POSTGRES_BIN"])
    if found := shutil.which("initdb"):
        return Path(found).resolve().parent  # Debian links a few of them into /usr/local/bin; createdb is beside
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if not versions:
        raise RuntimeError("initdb is not installed: run 'sudo apt-get install postgresql'")
    return versions[-1].parent


@dataclass
class Postgres:
    """A PostgreSQL server: ``start()`` creates its cluster and database, ``stop()`` removes it all."""

    port: int = 0
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="gpu-pack-pg-")))
    user: str = ""  # the OS user it runs as ("" : this process's)

    @property
    def url(self) -> str:
        return f"postgresql://{self.role}@127.0.0.1:{self.port}/{DATABASE}"

    @property
    def role(self) -> str:
        return self.user or pwd.getpwuid(os.getuid()).pw_name

    def _run(self, *args: str) -> None:
        command = [str(a) for a in args]
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode:
            raise RuntimeError(f"{' '.join(command)} failed: {done.stdout}{done.stderr}")

    def start(self) -> None:
        if os.getuid() == 0 and not self.user:
            self.user = "postgres"
            os.chown(self.workdir, pwd.getpwnam(self.user).pw_uid, -1)
        binaries = bin_dir()
        data = self.workdir / "data"
        self.port = self.port or free_port()
        self._run(binaries / "initdb", "-D", data, "-A", "trust", "-U", self.role, "--no-sync", "-E", "UTF8")
        options = f"-p {self.port} -k {self.workdir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(binaries / "pg_ctl", "-D", data, "-o", options, "-l", self.workdir / "server.log", "-w", "start")
        try:
            self._run(binaries / "createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.role, DATABASE)
        except RuntimeError:
            self.stop()
            raise

    def database(self, name: str) -> str:
        """A new, empty database on the server: its URL."""
        self._run(bin_dir() / "createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.role, name)
        return self.url.rsplit("/", 1)[0] + f"/{name}"

    def stop(self) -> None:
        data = self.workdir / "data"
        if (data / "postmaster.pid").exists():
            self._run(bin_dir() / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.workdir, ignore_errors=True)
