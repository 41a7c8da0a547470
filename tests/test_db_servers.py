"""The real database servers the SQL tests run against (tests/support/db_servers.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from db_servers import (
    DB_KINDS,
    DIR_PREFIX,
    SERVER_KINDS,
    Database,
    DatabaseServerError,
    database_fixture,
    database_server,
    remove_stale_dirs,
    running_shared_servers,
    shared_server,
    unreachable_url,
)

SUPPORT = Path(__file__).parent / "support"
TEXT = "Zoë ☃ 数据"  # must survive the round trip (utf8mb4 on MariaDB)

# A fresh database per test on a server shared by the session, for each of DB_KINDS; narrow it
# with @pytest.mark.parametrize("database", ["postgresql"], indirect=True).
database = database_fixture()


def _roundtrip(db: Database) -> list[tuple]:
    engine = db.engine()
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text("CREATE TABLE employee (id INTEGER PRIMARY KEY, name VARCHAR(40))")
            )
            conn.execute(
                sa.text("INSERT INTO employee (id, name) VALUES (:id, :name)"),
                [{"id": 1, "name": "ann"}, {"id": 2, "name": TEXT}],
            )
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text("SELECT * FROM employee ORDER BY id"))]
    finally:
        engine.dispose()


def _listen_addresses(port: int) -> set[str]:
    """Local addresses with a listening TCP socket on `port` (from /proc/net/tcp{,6})."""
    found = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr_hex, port_hex = local.split(":")
            if state != "0A" or int(port_hex, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(addr_hex)
            # The kernel prints each 32-bit word in host (little-endian) order.
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.add(socket.inet_ntop(family, raw))
    return found


def _status(pid: int, key: str) -> str | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return line.split(":", 1)[1].split()[0]
    except OSError:
        return None
    return None


def _gone(pid: int, timeout: float = 20.0) -> bool:
    """The process exited (a zombie left to an init that does not reap counts as gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _status(pid, "State") in (None, "Z"):
            return True
        time.sleep(0.05)
    return False


def _our_server_processes(exclude: set[int]) -> list[int]:
    """Children of this process running from a test-server directory."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in exclude:
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if DIR_PREFIX.encode() in cmdline and _status(int(proc.name), "PPid") == str(os.getpid()):
            if _status(int(proc.name), "State") != "Z":
                pids.append(int(proc.name))
    return pids


@pytest.mark.parametrize("kind", SERVER_KINDS)
def test_server_starts_unprivileged_on_loopback_with_a_password_and_cleans_up(kind):
    with database_server(kind) as server:
        db = server.database
        print(
            f"{kind} start-up: " + ", ".join(f"{k} {v:.2f}s" for k, v in server.startup_s.items())
        )
        assert server.startup_s["total"] < 30

        # The URL carries a password; the helper's reprs never show it.
        assert db.password and len(db.password) >= 8 and db.password in db.url
        for text in (db.masked_url, repr(db), repr(server)):
            assert db.password not in text
        assert db.sqlalchemy_url.host == "127.0.0.1" and db.sqlalchemy_url.port == db.port

        assert _roundtrip(db) == [(1, "ann"), (2, TEXT)]

        # Passwords are checked, for the test user and for the superuser.
        url = db.sqlalchemy_url
        admin = sa.make_url(server.admin_url)
        for bad in (url.set(password="wrong"), url.set(password=""), admin.set(password="")):
            engine = sa.create_engine(bad)
            with pytest.raises(sa.exc.OperationalError), engine.connect():
                pass
            engine.dispose()
        engine = sa.create_engine(server.admin_url)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT 1")).scalar() == 1
        engine.dispose()

        # Only 127.0.0.1 listens: not 0.0.0.0, not ::1, not another loopback address.
        assert _listen_addresses(db.port) == {"127.0.0.1"}
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.2", db.port), timeout=5).close()

        # Never root (PostgreSQL refuses to; MariaDB should not), also when the tests are.
        assert _status(server.pid, "Uid") not in (None, "0")

        pid, base = server.pid, server.base_dir
        assert base.is_dir() and (base / "data").is_dir()

    assert _gone(pid, timeout=1), "the server process outlived its context"
    with pytest.raises(ProcessLookupError):  # nor any of its children (PostgreSQL backends)
        os.killpg(pid, 0)
    assert not base.exists(), "the server directory outlived its context"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", db.port), timeout=5).close()


@pytest.mark.skipif(os.geteuid() != 0, reason="the servers run as this user unless it is root")
@pytest.mark.parametrize("kind", SERVER_KINDS)
def test_a_server_starts_when_the_suites_tmpdir_is_private_to_root(kind, tmp_path, monkeypatch):
    """The unprivileged server user cannot write a root-only 0700 TMPDIR: the servers get
    their own tmp/ in their directory (mariadb-install-db failed at once without it)."""
    private = tmp_path / "root-only"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("TMPDIR", str(private))
    with database_server(kind) as server:
        assert oct(private.stat().st_mode & 0o777) == "0o700"
        assert _roundtrip(server.database) == [(1, "ann"), (2, TEXT)]
        assert list(private.iterdir()) == []


def test_fresh_database_per_test(database):
    engine = database.engine()
    try:
        assert sa.inspect(engine).get_table_names() == []
    finally:
        engine.dispose()
    assert _roundtrip(database) == [(1, "ann"), (2, TEXT)]


@pytest.mark.parametrize("database", ["mariadb"], indirect=True)
def test_database_fixture_narrows_to_one_kind(database):
    assert database.kind == "mariadb" and database.url.startswith("mysql+pymysql://")


@pytest.mark.parametrize("kind", DB_KINDS)
def test_shared_server_is_started_once_and_drops_fresh_databases(kind):
    server = shared_server(kind)
    assert shared_server(kind) is server

    with server.fresh_database() as db:
        assert db.kind == kind and db.name != server.database.name
        _roundtrip(db)
        # A session left open inside a transaction must not stall (or survive) the drop.
        engine = db.engine()
        conn = engine.connect()
        conn.execute(sa.text("SELECT * FROM employee"))
        started = time.monotonic()
    assert time.monotonic() - started < 20
    conn.invalidate()
    engine.dispose()

    # Dropped: PostgreSQL and MariaDB refuse the database, SQLite's file is gone.
    if kind == "sqlite":
        assert not (server.base_dir / f"{db.name}.sqlite").exists()
    else:
        engine = db.engine()
        with pytest.raises(sa.exc.OperationalError), engine.connect():
            pass
        engine.dispose()

    # The default database was left alone, and names are identifiers, never SQL.
    engine = server.database.engine()
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT 1")).scalar() == 1
    engine.dispose()
    with pytest.raises(ValueError, match="identifier"):
        server.create_database("x; DROP DATABASE elasticdl")


_BROKEN = {
    "postgresql": (["-c", "shared_buffers=lots"], "shared_buffers"),
    "mariadb": (["--no-such-option-elasticdl"], "no-such-option-elasticdl"),
}


@pytest.mark.parametrize("kind", SERVER_KINDS)
def test_a_server_that_does_not_start_says_why_and_leaves_nothing(kind):
    extra_args, expected = _BROKEN[kind]
    shared = running_shared_servers()
    with pytest.raises(DatabaseServerError) as failure:
        with database_server(kind, extra_args=extra_args):
            pass
    message = str(failure.value)
    assert "before accepting connections" in message and expected in message  # the log tail
    assert _our_server_processes(exclude={s.pid for s in shared}) == []
    parents = {Path(tempfile.gettempdir()), Path("/tmp"), Path("/dev/shm")}
    left = [
        p
        for parent in parents
        for p in parent.glob(f"{DIR_PREFIX}{kind}-*")
        if p not in {s.base_dir for s in shared}
        and (p / "owner.pid").is_file()
        and (p / "owner.pid").read_text() == str(os.getpid())
    ]
    assert left == []


_OWNER = """
import sys, time
sys.path.insert(0, sys.argv[1])
import db_servers
if sys.argv[3] == "no-pdeathsig":
    db_servers._setpriv_pdeathsig = False  # as without setpriv --pdeathsig
with db_servers.database_server(sys.argv[2]) as server:
    print(server.pid, server.base_dir, flush=True)
    time.sleep(120)
"""


def _start_owner_and_kill_it(kind: str, mode: str) -> tuple[int, Path]:
    """Start a server in a child process, SIGKILL the child; the server's pid and directory."""
    owner = subprocess.Popen(
        [sys.executable, "-P", "-c", _OWNER, str(SUPPORT), kind, mode],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = owner.stdout.readline().split()
        assert line, f"the owner process failed (exit {owner.poll()})"
        pid, base = int(line[0]), Path(line[1])
        assert _status(pid, "State") not in (None, "Z") and base.is_dir()
    finally:
        owner.kill()
        owner.wait(30)
        owner.stdout.close()
    return pid, base


@pytest.mark.parametrize("kind", SERVER_KINDS)
def test_a_server_dies_with_its_owner_even_on_sigkill(kind):
    pid, base = _start_owner_and_kill_it(kind, "pdeathsig")
    assert _gone(pid), f"{kind} server {pid} outlived the process that started it"
    # Its directory stays behind (nobody ran the cleanup); the next start removes it.
    assert base.is_dir()
    assert base in remove_stale_dirs(base.parent)
    assert not base.exists()


def test_the_next_start_removes_a_server_that_outlived_its_owner():
    pid, base = _start_owner_and_kill_it("postgresql", "no-pdeathsig")
    time.sleep(0.5)
    assert _status(pid, "State") not in (None, "Z"), "expected an orphan without pdeathsig"
    assert base in remove_stale_dirs(base.parent)
    assert _gone(pid) and not base.exists()


@pytest.mark.parametrize("kind", SERVER_KINDS)
def test_unreachable_url_fails_fast(kind):
    engine = sa.create_engine(unreachable_url(kind))
    started = time.monotonic()
    with pytest.raises(sa.exc.OperationalError), engine.connect():
        pass
    assert time.monotonic() - started < 10
    engine.dispose()


def test_server_binaries_are_reported_missing_clearly(monkeypatch):
    import db_servers

    monkeypatch.setattr(db_servers, "_find_exe", lambda names, dirs: None)
    with pytest.raises(DatabaseServerError, match="install_db_servers.sh"):
        with database_server("mariadb"):
            pass
