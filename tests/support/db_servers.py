"""Test helper: throwaway PostgreSQL and MariaDB servers on 127.0.0.1, and SQLite files.

    database = database_fixture()              # in the test module: a fixture, once per kind

    def test_x(database):                      # a fresh, empty database on a shared server
        engine = database.engine()
        database.url               # "postgresql+psycopg://elasticdl:pg-...@127.0.0.1:PORT/t_..."

    with database_url("mariadb") as url: ...   # the same without pytest
    with postgresql_server() as server: ...    # a server of its own (to stop, to break)

Servers come from the Debian packages `postgresql` and `mariadb-server` (scripts/setup.sh
installs them through scripts/install_db_servers.sh). Each runs from a temporary directory on a
free port of 127.0.0.1, never as root (as the `postgres` / `mysql` system user when this
process is root), with a user that has a password; durability is off so they start in about
a second. `shared_server(kind)` starts one server per kind and process on first use and stops it
at exit; `database_fixture(...)` hands each test its own fresh database on it. Every wait is
bounded; a server that does not come up fails with the tail of its log, and is killed. Servers
get a parent-death signal, so they die with this process even on SIGKILL; the directories such
a death leaves behind (and any server still using one) are removed by the next start
(`remove_stale_dirs`).

Environment: ELASTICDL_TEST_DB_DIR (where server directories go; default /dev/shm when it has
2 GiB free, else the temporary directory), ELASTICDL_TEST_PG_BINDIR (a PostgreSQL bin/
directory), ELASTICDL_TEST_DB_START_TIMEOUT_S (each bounded wait; default 60).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

DB_KINDS = ("sqlite", "postgresql", "mariadb")
SERVER_KINDS = ("postgresql", "mariadb")
HOST = "127.0.0.1"
START_TIMEOUT_S = float(os.environ.get("ELASTICDL_TEST_DB_START_TIMEOUT_S", "60"))
STOP_TIMEOUT_S = 15.0
DEFAULT_USER = "elasticdl"
DEFAULT_DATABASE = "elasticdl"
DIR_PREFIX = "elasticdl-testdb-"
INSTALL_HINT = (
    "run scripts/install_db_servers.sh as root "
    "(apt-get install -y --no-install-recommends postgresql mariadb-server)"
)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_PORT_TAKEN = ("Address already in use", "Bind on TCP/IP port")


class DatabaseServerError(RuntimeError):
    """A test database server could not be found, set up or started."""


# ----------------------------------------------------------------------------- databases


@dataclass(frozen=True)
class Database:
    """One database a test may use. `url` carries the password; repr() masks it."""

    kind: str
    url: str = field(repr=False)
    name: str
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    host: str | None = None
    port: int | None = None

    @property
    def sqlalchemy_url(self) -> sa.URL:
        return sa.make_url(self.url)

    @property
    def masked_url(self) -> str:
        """The URL with the password replaced by ***."""
        return self.sqlalchemy_url.render_as_string(hide_password=True)

    def engine(self, **kwargs: Any) -> sa.Engine:
        """A new SQLAlchemy engine (dispose of it when done, or let the database drop kill it)."""
        return sa.create_engine(self.url, **kwargs)


def _password(prefix: str) -> str:
    # Distinctive and random, so a test can grep output for it; URL-safe characters only.
    return f"{prefix}-{secrets.token_hex(8)}"


def _check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"not a plain SQL identifier: {name!r}")
    return name


_counter = itertools.count(1)


def _fresh_name() -> str:
    return f"t_{os.getpid()}_{next(_counter)}_{secrets.token_hex(2)}"


class DatabaseServer:
    """A running server (or, for SQLite, a directory): a default database and fresh ones."""

    kind: str
    database: Database  # the default database of the test user
    admin_url: str | None = None  # superuser URL (None for SQLite)
    pid: int | None = None
    base_dir: Path | None = None
    startup_s: dict[str, float]

    def create_database(self, name: str | None = None) -> Database:
        raise NotImplementedError

    def drop_database(self, name: str) -> None:
        raise NotImplementedError

    @contextlib.contextmanager
    def fresh_database(self) -> Iterator[Database]:
        """A new empty database owned by the test user, dropped afterwards (connections too)."""
        db = self.create_database()
        try:
            yield db
        finally:
            self.drop_database(db.name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.database.masked_url} pid={self.pid}>"


# ----------------------------------------------------------------------------- processes


@dataclass(frozen=True)
class _User:
    name: str
    uid: int
    gid: int


def _unprivileged_user(preferred: str) -> _User | None:
    """Who the server runs as: None (this process's user) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in (preferred, "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        if entry.pw_uid != 0:
            return _User(name, entry.pw_uid, entry.pw_gid)
    raise DatabaseServerError(f"running as root, and no unprivileged user ({preferred}, nobody)")


_setpriv_pdeathsig: bool | None = None


def _wrap(argv: Sequence[str], run_as: _User | None, death_signal: signal.Signals) -> list[str]:
    """argv run as `run_as` (via setpriv), killed with `death_signal` if this thread dies."""
    global _setpriv_pdeathsig
    setpriv = shutil.which("setpriv") or (
        "/usr/bin/setpriv" if Path("/usr/bin/setpriv").exists() else None
    )
    prefix: list[str] = []
    if run_as is not None:
        if setpriv is None:
            raise DatabaseServerError("setpriv (util-linux) is needed to drop root privileges")
        prefix = [setpriv, f"--reuid={run_as.uid}", f"--regid={run_as.gid}", "--clear-groups"]
    if setpriv is not None and threading.current_thread() is threading.main_thread():
        # The signal fires when the spawning *thread* exits: only the main thread lives as
        # long as the process.
        if _setpriv_pdeathsig is None:
            help_text = subprocess.run([setpriv, "--help"], capture_output=True, text=True)
            _setpriv_pdeathsig = "--pdeathsig" in help_text.stdout
        if _setpriv_pdeathsig:
            prefix = prefix or [setpriv]
            prefix.append(f"--pdeathsig={death_signal.name.removeprefix('SIG')}")
    return [*prefix, "--", *map(str, argv)] if prefix else [str(a) for a in argv]


def _env(base: Path) -> dict[str, str]:
    """The servers' environment: none of their own client variables, and TMPDIR the server
    directory's `tmp/` (the server user's): the suite's TMPDIR may be private to this user
    (mariadb-install-db and mariadbd fail at once where they cannot write theirs)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PG", "MYSQL", "MARIADB")) and k not in ("LANG", "LANGUAGE")
    }
    env["LC_ALL"] = "C"
    env["TMPDIR"] = str(base / "tmp")
    return env


def _tail(*paths: Path, lines: int = 40) -> str:
    parts = []
    for path in paths:
        try:
            text = path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            continue
        parts.append(f"--- {path.name} (last {len(text)} lines) ---\n" + "\n".join(text))
    return "\n".join(parts) or "(no log)"


def _run_step(
    what: str, argv: Sequence[str], *, run_as: _User | None, cwd: Path, log: Path
) -> None:
    with open(log, "ab") as out:
        try:
            result = subprocess.run(
                _wrap(argv, run_as, signal.SIGKILL),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=_env(cwd),
                timeout=START_TIMEOUT_S,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            raise DatabaseServerError(
                f"{what} did not finish in {START_TIMEOUT_S:.0f}s\n{_tail(log)}"
            ) from None
    if result.returncode != 0:
        raise DatabaseServerError(f"{what} failed (exit {result.returncode})\n{_tail(log)}")


class _Process:
    """A server process in its own session, stopped with `stop_signal`, then SIGKILL."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        run_as: _User | None,
        cwd: Path,
        log: Path,
        stop_signal: signal.Signals,
    ) -> None:
        self.log = log
        self.stop_signal = stop_signal
        with open(log, "ab") as out:
            self.popen = subprocess.Popen(
                _wrap(argv, run_as, stop_signal),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=_env(cwd),
                start_new_session=True,
            )
        self.pid = self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(self.stop_signal)
            try:
                self.popen.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, signal.SIGKILL)
                self.popen.wait(STOP_TIMEOUT_S)
        # Children (PostgreSQL backends) leave on their own when the postmaster dies; make sure.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class _PortTaken(Exception):
    pass


def _wait_ready(
    what: str, proc: _Process, try_connect: Callable[[], Any], logs: Sequence[Path]
) -> float:
    """Poll `try_connect` until it succeeds; seconds waited. Raises with the log tail."""
    start = time.monotonic()
    deadline = start + START_TIMEOUT_S
    last_error: BaseException | None = None
    while True:
        if not proc.alive():
            log_text = _tail(*logs)
            if any(marker in log_text for marker in _PORT_TAKEN):
                raise _PortTaken(log_text)
            raise DatabaseServerError(
                f"{what} exited (code {proc.popen.returncode}) before accepting connections\n"
                f"{log_text}"
            )
        try:
            conn = try_connect()
        except Exception as e:  # noqa: BLE001 - any connection error means "not yet"
            last_error = e
        else:
            conn.close()
            return time.monotonic() - start
        if time.monotonic() > deadline:
            raise DatabaseServerError(
                f"{what} did not accept connections within {START_TIMEOUT_S:.0f}s "
                f"(last error: {last_error})\n{_tail(*logs)}"
            )
        time.sleep(0.05)


# ----------------------------------------------------------------------------- directories


def _traversable_by(path: Path, user: _User) -> bool:
    for p in [path, *path.parents]:
        st = p.stat()
        if not (st.st_mode & 0o001 or (st.st_uid == user.uid and st.st_mode & 0o100)):
            return False
    return True


MEMORY_DIR = Path("/dev/shm")
MEMORY_DIR_MIN_FREE = 2 << 30


def _dir_parent(run_as: _User | None, in_memory: bool = False) -> Path:
    """Where a server's directory goes: ELASTICDL_TEST_DB_DIR, else (`in_memory`) a tmpfs
    /dev/shm with 2 GiB free, else the temporary directory."""
    override = os.environ.get("ELASTICDL_TEST_DB_DIR")
    candidates = [Path(override)] if override else []
    if in_memory and MEMORY_DIR.is_dir():
        with contextlib.suppress(OSError):
            if shutil.disk_usage(MEMORY_DIR).free >= MEMORY_DIR_MIN_FREE:
                candidates.append(MEMORY_DIR)
    candidates += [Path(tempfile.gettempdir()), Path("/tmp")]
    for parent in candidates:
        # Unix socket paths must stay under ~107 bytes.
        if parent.is_dir() and os.access(parent, os.W_OK) and len(str(parent)) < 50:
            if run_as is None or _traversable_by(parent.resolve(), run_as):
                return parent
    raise DatabaseServerError(f"no short directory the server can reach among {candidates}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_processes_using(path: Path) -> None:
    needle = str(path).encode() + b"/"
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if needle in (proc / "cmdline").read_bytes():
                os.kill(int(proc.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue


def remove_stale_dirs(parent: Path | None = None) -> list[Path]:
    """Remove server directories whose owning process is gone (it was killed); returns them."""
    removed = []
    parents = [parent] if parent else {_dir_parent(None), _dir_parent(None, True), Path("/tmp")}
    for p in parents:
        for path in Path(p).glob(f"{DIR_PREFIX}*"):
            try:
                if path.stat().st_uid != os.geteuid():
                    continue
                owner = int((path / "owner.pid").read_text().strip() or 0)
            except (OSError, ValueError):
                continue
            if owner and owner != os.getpid() and not _pid_alive(owner):
                _kill_processes_using(path)  # a server that outlived its owner (no setpriv)
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


@contextlib.contextmanager
def _server_dir(kind: str, run_as: _User | None, in_memory: bool = False) -> Iterator[Path]:
    """base (ours, 0711) holding data/, run/ and tmp/ (the server user's, 0700) and the logs."""
    parent = _dir_parent(run_as, in_memory)
    remove_stale_dirs(parent)
    base = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{kind}-", dir=parent))
    try:
        os.chmod(base, 0o711)
        (base / "owner.pid").write_text(str(os.getpid()))
        for sub in ("data", "run", "tmp"):
            (base / sub).mkdir(mode=0o700)
            if run_as is not None:
                os.chown(base / sub, run_as.uid, run_as.gid)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)
        if base.exists():  # a straggler was still writing: once more
            time.sleep(0.2)
            shutil.rmtree(base, ignore_errors=True)


def _private_file(path: Path, text: str, run_as: _User | None) -> Path:
    path.write_text(text)
    os.chmod(path, 0o600)
    if run_as is not None:
        os.chown(path, run_as.uid, run_as.gid)
    return path


def _start_with_free_port(
    what: str, start: Callable[[int], _Process], try_connect: Callable[[int], Any], logs: list[Path]
) -> tuple[_Process, int, float]:
    for _attempt in range(3):
        port = _free_port()
        for log in logs:
            log.write_bytes(b"")  # this attempt's log only
        proc = start(port)
        try:
            waited = _wait_ready(what, proc, lambda port=port: try_connect(port), logs)
        except _PortTaken:
            proc.stop()  # another process took the port between probe and bind: try another
            continue
        except BaseException:
            proc.stop()
            raise
        return proc, port, waited
    raise DatabaseServerError(f"{what}: no free port after 3 attempts\n{_tail(*logs)}")


# ----------------------------------------------------------------------------- PostgreSQL


def _version_key(path: Path) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in path.parent.name.split("."))
    except ValueError:
        return (-1,)


def postgresql_bindir() -> Path:
    """The directory holding initdb and postgres (the newest /usr/lib/postgresql/*/bin)."""
    candidates = []
    if os.environ.get("ELASTICDL_TEST_PG_BINDIR"):
        candidates.append(Path(os.environ["ELASTICDL_TEST_PG_BINDIR"]))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=_version_key, reverse=True)
    candidates += sorted(Path("/usr").glob("pgsql-*/bin"), reverse=True)  # RPM layout
    for exe in ("postgres", "initdb"):
        found = shutil.which(exe)
        if found:
            candidates.append(Path(found).resolve().parent)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "postgres").is_file():
            return bindir
    raise DatabaseServerError(
        f"PostgreSQL server binaries (initdb, postgres) not found: {INSTALL_HINT}"
    )


def _pg_connect(port: int, user: str, password: str, dbname: str) -> Any:
    import psycopg

    return psycopg.connect(
        host=HOST,
        port=port,
        user=user,
        password=password,
        dbname=dbname,
        autocommit=True,
        connect_timeout=5,
    )


class PostgreSQLServer(DatabaseServer):
    kind = "postgresql"

    def __init__(self, port: int, admin_password: str, user: str, password: str) -> None:
        self.port = port
        self._admin_password = admin_password
        self.user = user
        self.password = password
        self.admin_url = self._url("admin", admin_password, "postgres")

    def _url(self, user: str, password: str, dbname: str) -> str:
        url = sa.URL.create(
            "postgresql+psycopg",
            username=user,
            password=password,
            host=HOST,
            port=self.port,
            database=dbname,
        )
        return url.render_as_string(hide_password=False)

    def _admin(self) -> Any:
        return _pg_connect(self.port, "admin", self._admin_password, "postgres")

    def _setup_user(self) -> None:
        from psycopg import sql

        with self._admin() as conn:
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(self.user), sql.Literal(self.password)
                )
            )

    def create_database(self, name: str | None = None) -> Database:
        from psycopg import sql

        name = _check_name(name or _fresh_name())
        with self._admin() as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(name), sql.Identifier(self.user)
                )
            )
        return Database(
            "postgresql",
            self._url(self.user, self.password, name),
            name,
            self.user,
            self.password,
            HOST,
            self.port,
        )

    def drop_database(self, name: str) -> None:
        from psycopg import sql

        with self._admin() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(_check_name(name))
                )
            )


@contextlib.contextmanager
def postgresql_server(
    *,
    user: str = DEFAULT_USER,
    password: str | None = None,
    database: str = DEFAULT_DATABASE,
    extra_args: Sequence[str] = (),
) -> Iterator[PostgreSQLServer]:
    """A PostgreSQL server of its own; `extra_args` go to `postgres` (e.g. ["-c", "k=v"])."""
    t0 = time.monotonic()
    bindir = postgresql_bindir()
    run_as = _unprivileged_user("postgres")
    # In memory when there is room (initdb writes ~40 MB in ~1000 files: 2x faster on tmpfs).
    with _server_dir("postgresql", run_as, in_memory=True) as base:
        data, run, log = base / "data", base / "run", base / "server.log"
        admin_password = _password("pg-admin")
        pwfile = _private_file(run / "admin.pw", admin_password + "\n", run_as)
        _run_step(
            "PostgreSQL initdb",
            [
                bindir / "initdb",
                "-D",
                data,
                "--username=admin",
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            run_as=run_as,
            cwd=base,
            log=base / "initdb.log",
        )
        pwfile.unlink()
        t_init = time.monotonic()

        def start(port: int) -> _Process:
            settings = {
                "listen_addresses": HOST,
                "port": str(port),
                "unix_socket_directories": "",  # TCP on loopback only
                "fsync": "off",
                "synchronous_commit": "off",
                "full_page_writes": "off",
                "shared_buffers": "32MB",
                "wal_level": "minimal",  # with max_wal_senders=0: bulk loads skip most WAL
                "max_wal_senders": "0",
                "max_wal_size": "256MB",  # bounded WAL (it may be in memory)
                "min_wal_size": "32MB",
                "max_connections": "100",
                "logging_collector": "off",
                "log_min_messages": "warning",
            }
            argv = [bindir / "postgres", "-D", data]
            for key, value in settings.items():
                argv += ["-c", f"{key}={value}"]
            argv += list(extra_args)
            # SIGINT: "fast" shutdown (rolls back sessions, exits in well under a second).
            return _Process(argv, run_as=run_as, cwd=base, log=log, stop_signal=signal.SIGINT)

        proc, port, _ = _start_with_free_port(
            "PostgreSQL",
            start,
            lambda port: _pg_connect(port, "admin", admin_password, "postgres"),
            [log],
        )
        try:
            t_start = time.monotonic()
            server = PostgreSQLServer(port, admin_password, user, password or _password("pg"))
            server._setup_user()
            server.database = server.create_database(database)
            server.pid, server.base_dir = proc.pid, base
            server.startup_s = {
                "init": t_init - t0,
                "start": t_start - t_init,
                "setup": time.monotonic() - t_start,
                "total": time.monotonic() - t0,
            }
            yield server
        finally:
            proc.stop()


# ----------------------------------------------------------------------------- MariaDB


def _find_exe(names: Sequence[str], dirs: Sequence[str]) -> Path | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return Path(found)
        for d in dirs:
            if (Path(d) / name).is_file():
                return Path(d) / name
    return None


def mariadb_binaries() -> tuple[Path, Path]:
    """(mariadbd, mariadb-install-db)."""
    server = _find_exe(["mariadbd", "mysqld"], ["/usr/sbin", "/usr/libexec", "/usr/local/sbin"])
    install = _find_exe(["mariadb-install-db", "mysql_install_db"], ["/usr/bin", "/usr/local/bin"])
    if server is None or install is None:
        raise DatabaseServerError(
            f"MariaDB server binaries (mariadbd, mariadb-install-db) not found: {INSTALL_HINT}"
        )
    return server, install


def _mariadb_version(mariadbd: Path) -> tuple[int, ...]:
    out = subprocess.run([mariadbd, "--version"], capture_output=True, text=True, timeout=30)
    match = re.search(r"Ver\s+(\d+)\.(\d+)\.(\d+)", out.stdout)
    return tuple(int(x) for x in match.groups()) if match else (0,)


def _my_connect(port: int | None = None, unix_socket: Path | None = None, **kwargs: Any) -> Any:
    import pymysql

    if unix_socket is not None:
        return pymysql.connect(unix_socket=str(unix_socket), connect_timeout=5, **kwargs)
    return pymysql.connect(host=HOST, port=port, connect_timeout=5, **kwargs)


def _quote_my(name: str) -> str:
    return f"`{_check_name(name)}`"


class MariaDBServer(DatabaseServer):
    kind = "mariadb"

    def __init__(self, port: int, admin_password: str, user: str, password: str) -> None:
        self.port = port
        self._admin_password = admin_password
        self.user = user
        self.password = password
        self.admin_url = self._url("root", admin_password, None)

    def _url(self, user: str, password: str, dbname: str | None) -> str:
        url = sa.URL.create(
            "mysql+pymysql",
            username=user,
            password=password,
            host=HOST,
            port=self.port,
            database=dbname,
            query={"charset": "utf8mb4"},
        )
        return url.render_as_string(hide_password=False)

    def _admin(self) -> Any:
        return _my_connect(self.port, user="root", password=self._admin_password, autocommit=True)

    def _secure(self, unix_socket: Path) -> None:
        # mariadb-install-db leaves root without a password (root@localhost, @127.0.0.1, @::1,
        # @hostname): keep root on the socket and 127.0.0.1 only, with a password.
        conn = _my_connect(unix_socket=unix_socket, user="root", password="", autocommit=True)
        with conn, conn.cursor() as cur:
            cur.execute("SELECT User, Host FROM mysql.user WHERE User IN ('root', '')")
            for user, host in cur.fetchall():
                if user == "root" and host in ("localhost", HOST):
                    cur.execute(
                        "ALTER USER %s@%s IDENTIFIED BY %s", (user, host, self._admin_password)
                    )
                else:
                    cur.execute("DROP USER %s@%s", (user, host))
            cur.execute(
                "CREATE USER IF NOT EXISTS 'root'@%s IDENTIFIED BY %s", (HOST, self._admin_password)
            )
            cur.execute("GRANT ALL PRIVILEGES ON *.* TO 'root'@%s WITH GRANT OPTION", (HOST,))
            cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (self.user, self.password))

    def create_database(self, name: str | None = None) -> Database:
        name = _check_name(name or _fresh_name())
        conn = self._admin()
        with conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {_quote_my(name)} CHARACTER SET utf8mb4")
            cur.execute(f"GRANT ALL PRIVILEGES ON {_quote_my(name)}.* TO %s@'%%'", (self.user,))
        return Database(
            "mariadb",
            self._url(self.user, self.password, name),
            name,
            self.user,
            self.password,
            HOST,
            self.port,
        )

    def drop_database(self, name: str) -> None:
        conn = self._admin()
        with conn, conn.cursor() as cur:
            # Sessions left open on it would hold metadata locks and stall the DROP.
            cur.execute(
                "SELECT ID FROM information_schema.PROCESSLIST"
                " WHERE DB = %s AND ID <> CONNECTION_ID()",
                (name,),
            )
            for (session,) in cur.fetchall():
                with contextlib.suppress(Exception):
                    cur.execute(f"KILL CONNECTION {int(session)}")
            cur.execute("SET SESSION lock_wait_timeout = 20")
            cur.execute(f"DROP DATABASE IF EXISTS {_quote_my(name)}")
            cur.execute(f"REVOKE ALL PRIVILEGES ON {_quote_my(name)}.* FROM %s@'%%'", (self.user,))


@contextlib.contextmanager
def mariadb_server(
    *,
    user: str = DEFAULT_USER,
    password: str | None = None,
    database: str = DEFAULT_DATABASE,
    extra_args: Sequence[str] = (),
) -> Iterator[MariaDBServer]:
    """A MariaDB server of its own; `extra_args` go to `mariadbd` (e.g. ["--key=value"])."""
    t0 = time.monotonic()
    mariadbd, install_db = mariadb_binaries()
    run_as = _unprivileged_user("mysql")
    # In memory when there is room: MariaDB fsyncs its DDL log on every CREATE/DROP whatever the
    # settings (~1000 fsyncs to bootstrap: seconds on a busy disk, 0.1 s on tmpfs).
    with _server_dir("mariadb", run_as, in_memory=True) as base:
        data, run, log = base / "data", base / "run", base / "server.log"
        sock = run / "mariadbd.sock"
        # Durability off; small buffers; no binary log; buffered redo-log writes (O_DIRECT
        # otherwise, which makes the bootstrap several times slower on a real disk).
        tuning = [
            "--skip-log-bin",
            "--innodb-buffer-pool-size=64M",
            "--innodb-log-file-size=32M",
            "--innodb-flush-log-at-trx-commit=0",
            "--innodb-doublewrite=0",
            "--innodb-flush-method=fsync",
            "--innodb-use-native-aio=0",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
        ]
        if _mariadb_version(mariadbd) >= (10, 8):
            tuning.append("--innodb-log-file-buffering=ON")
        _run_step(
            "mariadb-install-db",
            [
                install_db,
                "--no-defaults",
                f"--datadir={data}",
                "--skip-test-db",
                "--auth-root-authentication-method=normal",
                "--skip-name-resolve",
                *tuning,
            ],
            run_as=run_as,
            cwd=base,
            log=base / "install-db.log",
        )
        t_init = time.monotonic()

        def start(port: int) -> _Process:
            argv = [
                mariadbd,
                "--no-defaults",
                f"--datadir={data}",
                f"--socket={sock}",
                f"--port={port}",
                f"--bind-address={HOST}",
                "--skip-name-resolve",
                f"--pid-file={run / 'mariadbd.pid'}",
                f"--tmpdir={run}",
                "--skip-performance-schema",
                "--max-connections=200",
                *tuning,
                *extra_args,
            ]
            return _Process(argv, run_as=run_as, cwd=base, log=log, stop_signal=signal.SIGTERM)

        proc, port, _ = _start_with_free_port(
            "MariaDB",
            start,
            lambda port: _my_connect(unix_socket=sock, user="root", password=""),
            [log],
        )
        try:
            t_start = time.monotonic()
            server = MariaDBServer(port, _password("my-admin"), user, password or _password("my"))
            server._secure(sock)
            server.database = server.create_database(database)
            server.pid, server.base_dir = proc.pid, base
            server.startup_s = {
                "init": t_init - t0,
                "start": t_start - t_init,
                "setup": time.monotonic() - t_start,
                "total": time.monotonic() - t0,
            }
            yield server
        finally:
            proc.stop()


# ----------------------------------------------------------------------------- SQLite


class SQLiteServer(DatabaseServer):
    """A directory of SQLite files, so SQLite reads like the servers."""

    kind = "sqlite"

    def __init__(self, directory: Path) -> None:
        self.base_dir = directory
        self.startup_s = {"total": 0.0}

    def create_database(self, name: str | None = None) -> Database:
        name = _check_name(name or _fresh_name())
        path = self.base_dir / f"{name}.sqlite"
        sqlite3.connect(path).close()
        return Database("sqlite", f"sqlite:///{path}", name)

    def drop_database(self, name: str) -> None:
        for suffix in ("", "-journal", "-wal", "-shm"):
            (self.base_dir / f"{_check_name(name)}.sqlite{suffix}").unlink(missing_ok=True)


@contextlib.contextmanager
def sqlite_server(database: str = DEFAULT_DATABASE) -> Iterator[SQLiteServer]:
    with tempfile.TemporaryDirectory(prefix=f"{DIR_PREFIX}sqlite-") as tmp:
        server = SQLiteServer(Path(tmp))
        server.database = server.create_database(database)
        yield server


# ----------------------------------------------------------------------------- entry points


def database_server(kind: str, **kwargs: Any) -> contextlib.AbstractContextManager[Any]:
    """A server of its own for `kind` in DB_KINDS (context manager)."""
    starters = {"sqlite": sqlite_server, "postgresql": postgresql_server, "mariadb": mariadb_server}
    if kind not in starters:
        raise ValueError(f"unknown database kind {kind!r}; expected one of {DB_KINDS}")
    return starters[kind](**kwargs)


_shared: dict[str, DatabaseServer] = {}
_shared_errors: dict[str, str] = {}
_shared_stack = contextlib.ExitStack()
_shared_lock = threading.Lock()
_shared_owner = os.getpid()


def shared_server(kind: str) -> DatabaseServer:
    """This process's server of `kind`, started on first use and stopped at exit."""
    with _shared_lock:
        if kind in _shared_errors:
            raise DatabaseServerError(
                f"the {kind} test server failed to start earlier in this run:\n"
                + _shared_errors[kind]
            )
        if kind not in _shared:
            if not _shared:
                atexit.register(stop_shared_servers)
            try:
                _shared[kind] = _shared_stack.enter_context(database_server(kind))
            except DatabaseServerError as e:
                _shared_errors[kind] = str(e)
                raise
        return _shared[kind]


def running_shared_servers() -> list[DatabaseServer]:
    """The shared servers started so far in this process."""
    with _shared_lock:
        return list(_shared.values())


def stop_shared_servers() -> None:
    """Stop every shared server (at exit; only in the process that started them)."""
    if os.getpid() != _shared_owner:  # a forked child exiting must not stop our servers
        return
    with _shared_lock:
        _shared.clear()
        _shared_stack.close()


@contextlib.contextmanager
def fresh_database(kind: str) -> Iterator[Database]:
    """A new empty database on the shared server of `kind`, dropped afterwards."""
    with shared_server(kind).fresh_database() as db:
        yield db


@contextlib.contextmanager
def database_url(kind: str) -> Iterator[str]:
    """The SQLAlchemy URL (password included) of a fresh database of `kind`."""
    with fresh_database(kind) as db:
        yield db.url


def unreachable_url(kind: str) -> str:
    """A URL of `kind` whose server is down (nothing listens on its port)."""
    if kind == "sqlite":
        return "sqlite:////nonexistent-elasticdl-dir/db.sqlite"
    driver = {"postgresql": "postgresql+psycopg", "mariadb": "mysql+pymysql"}[kind]
    url = sa.URL.create(
        driver,
        username=DEFAULT_USER,
        password=_password("down"),
        host=HOST,
        port=_free_port(),
        database=DEFAULT_DATABASE,
    )
    return url.render_as_string(hide_password=False)


def database_fixture(
    kinds: Sequence[str] = DB_KINDS, *, scope: str = "function", name: str | None = None
) -> Any:
    """A pytest fixture yielding a fresh `Database` per kind (parametrized) and per `scope`.

    pg_and_maria = database_fixture(["postgresql", "mariadb"], scope="module")
    """
    for kind in kinds:
        if kind not in DB_KINDS:
            raise ValueError(f"unknown database kind {kind!r}; expected one of {DB_KINDS}")

    @pytest.fixture(scope=scope, params=list(kinds), ids=list(kinds), name=name)
    def _database(request: pytest.FixtureRequest) -> Iterator[Database]:
        with fresh_database(request.param) as db:
            yield db

    return _database
