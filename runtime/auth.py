"""Who may talk to a job: a per-job secret on every gRPC call, and optional TLS.

The master makes a fresh secret per job (`new_auth`) and writes it to `job.secret` beside
`job.json`, mode 0600 (`write_secret`); the JobConfig names that file (`secret_file`,
relative to the config's directory), so the parameter servers and workers the job launches
read it there (`for_process`). On Kubernetes the same file comes from a Secret the job owns,
projected beside job.json. The secret never travels on argv, in an environment literal, a log
line or a report.

Every call carries it as gRPC metadata (`channel`: a client interceptor); the servers check it
in constant time (`server_interceptors`) and refuse a call without it, or with another one,
with UNAUTHENTICATED before any servicer code runs. `None` for `JobAuth` means an open server
or a plain channel: what unit tests and benchmarks of one component use; every job passes one.

TLS (optional): `JobAuth.tls` holds a certificate and key the servers present and the CA the
clients verify them with (`load_tls`: a directory with `tls.crt`, `tls.key`, optionally
`ca.crt` -- the layout of a kubernetes.io/tls Secret -- and `server_name`, the DNS name the
certificate is issued for, default `elasticdl`; clients check that name, not the address they
dial, because PS Services and pod IPs are not known when the certificate is made).
"""

from __future__ import annotations

import dataclasses
import hmac
import logging
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import grpc

if TYPE_CHECKING:
    from elasticdl.runtime.job_config import JobConfig

SECRET_FILE = "job.secret"
METADATA_KEY = "x-elasticdl-job-secret"
DEFAULT_SERVER_NAME = "elasticdl"
_LOGGED_REFUSALS = 5

log = logging.getLogger("elasticdl.auth")


class AuthError(ValueError):
    """The job's secret or TLS files cannot be read; the message is one line."""


@dataclass(frozen=True)
class Tls:
    """PEM bytes: what a server presents (`cert`, `key`) and what a client trusts (`ca`)."""

    cert: bytes
    key: bytes = field(repr=False)
    ca: bytes
    server_name: str = DEFAULT_SERVER_NAME


@dataclass(frozen=True)
class JobAuth:
    """The credentials of one job's processes (the secret is kept out of `repr`)."""

    secret: str = field(repr=False)
    tls: Tls | None = None


def new_auth(tls: Tls | None = None) -> JobAuth:
    """Fresh credentials for a new job: 256 random bits."""
    return JobAuth(secrets.token_urlsafe(32), tls)


def write_secret(directory: str | Path, auth: JobAuth) -> Path:
    """Write `auth.secret` to `directory/job.secret`, readable by this user only (0600)."""
    path = Path(directory) / SECRET_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, auth.secret.encode())
    finally:
        os.close(fd)
    return path


def read_secret(path: str | Path, tls: Tls | None = None) -> JobAuth:
    """The credentials in a secret file written by `write_secret` (AuthError if unreadable)."""
    try:
        secret = Path(path).read_text().strip()
    except OSError as err:
        raise AuthError(f"cannot read the job's secret {path}: {err.strerror or err}") from None
    if not secret:
        raise AuthError(f"the job's secret file {path} is empty")
    return JobAuth(secret, tls)


def secret_from_flag(value: str | Path) -> JobAuth:
    """The credentials a command's --secret_file names: the job's secret file, or the log
    directory holding it. ValueError (one line, naming the flag) when it cannot be read."""
    path = Path(value)
    path = path / SECRET_FILE if path.is_dir() else path
    try:
        return read_secret(path)
    except AuthError as err:
        raise ValueError(f"--secret_file: {err}") from None


def load_tls(directory: str | Path) -> Tls:
    """TLS material from `directory` (see the module docstring); AuthError names what is
    missing."""
    root = Path(directory)

    def read(name: str, required: bool = True) -> bytes:
        try:
            return (root / name).read_bytes()
        except OSError as err:
            if not required:
                return b""
            raise AuthError(
                f"TLS: cannot read {root / name} ({err.strerror or err}); the directory needs "
                "tls.crt and tls.key (and ca.crt unless the certificate is self-signed)"
            ) from None

    cert, key = read("tls.crt"), read("tls.key")
    name = read("server_name", required=False).decode().strip() or DEFAULT_SERVER_NAME
    return Tls(cert, key, read("ca.crt", required=False) or cert, name)


def for_process(config_path: str | Path, secret_file: str, tls_dir: str = "") -> JobAuth | None:
    """The credentials a launched process reads: `secret_file` (and `tls_dir`) as its
    JobConfig names them, relative to the config file's directory. None: the job has none."""
    if not secret_file:
        return None
    base = Path(config_path).resolve().parent
    tls = load_tls(base / tls_dir) if tls_dir else None
    return read_secret(base / secret_file, tls)


# -- servers ----------------------------------------------------------------------------------


class SecretCheck(grpc.ServerInterceptor):
    """Lets through only calls whose metadata carries the job's secret (constant-time
    compare); any other call ends with UNAUTHENTICATED before the servicer sees it."""

    def __init__(self, secret: str) -> None:
        self._expected = secret.encode()
        self._refuse = grpc.unary_unary_rpc_method_handler(_deny)
        self.refused = 0

    def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        given = b""
        for key, value in handler_call_details.invocation_metadata or ():
            if key == METADATA_KEY:
                given = value if isinstance(value, bytes) else str(value).encode()
                break
        if given and hmac.compare_digest(given, self._expected):
            return continuation(handler_call_details)
        self.refused += 1
        if self.refused <= _LOGGED_REFUSALS:
            why = "a wrong job secret" if given else "no job secret"
            log.warning("refused a call to %s: %s", handler_call_details.method, why)
        return self._refuse


def _deny(request: Any, context: grpc.ServicerContext) -> None:
    context.abort(
        grpc.StatusCode.UNAUTHENTICATED,
        "this call does not carry the job's secret: only processes the job launched may call",
    )


def server_interceptors(auth: JobAuth | None) -> list[grpc.ServerInterceptor]:
    """What `grpc.server(..., interceptors=...)` takes: the secret check (none when open)."""
    return [SecretCheck(auth.secret)] if auth is not None else []


def add_port(server: grpc.Server, address: str, auth: JobAuth | None) -> int:
    """Bind `address` with TLS when `auth` has it, else plain; the bound port (0: failed)."""
    if auth is None or auth.tls is None:
        return server.add_insecure_port(address)
    credentials = grpc.ssl_server_credentials([(auth.tls.key, auth.tls.cert)])
    return server.add_secure_port(address, credentials)


# -- clients ----------------------------------------------------------------------------------


class _CallDetails(NamedTuple):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: Any
    compression: Any


class _CarrySecret(grpc.UnaryUnaryClientInterceptor):
    def __init__(self, secret: str) -> None:
        self._entry = (METADATA_KEY, secret)

    def intercept_unary_unary(
        self, continuation: Any, client_call_details: Any, request: Any
    ) -> Any:
        d = client_call_details
        carried = _CallDetails(
            d.method,
            d.timeout,
            (*(d.metadata or ()), self._entry),
            d.credentials,
            d.wait_for_ready,
            d.compression,
        )
        return continuation(carried, request)


class _SecretChannel(grpc.Channel):
    """An intercepted channel that still closes and works as a context manager."""

    def __init__(self, inner: grpc.Channel, secret: str) -> None:
        self._inner = inner
        self._intercepted = grpc.intercept_channel(inner, _CarrySecret(secret))

    def subscribe(self, callback: Any, try_to_connect: bool = False) -> None:
        self._inner.subscribe(callback, try_to_connect)

    def unsubscribe(self, callback: Any) -> None:
        self._inner.unsubscribe(callback)

    def unary_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._intercepted.unary_unary(method, *args, **kwargs)

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._intercepted.unary_stream(method, *args, **kwargs)

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._intercepted.stream_unary(method, *args, **kwargs)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._intercepted.stream_stream(method, *args, **kwargs)

    def close(self) -> None:
        self._inner.close()

    def __enter__(self) -> _SecretChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def channel(
    address: str, auth: JobAuth | None, options: Sequence[tuple[str, Any]] = ()
) -> grpc.Channel:
    """A channel to one of the job's servers whose every call carries the job's secret (TLS
    when `auth` has it); a plain channel when `auth` is None."""
    opts = list(options)
    if auth is not None and auth.tls is not None:
        opts.append(("grpc.ssl_target_name_override", auth.tls.server_name))
        creds = grpc.ssl_channel_credentials(root_certificates=auth.tls.ca)
        inner = grpc.secure_channel(address, creds, options=opts)
    else:
        inner = grpc.insecure_channel(address, options=opts)
    return inner if auth is None else _SecretChannel(inner, auth.secret)


# -- the master's side ------------------------------------------------------------------------


def secure(
    config: JobConfig, directory: str | Path, tls_dir: str = ""
) -> tuple[JobConfig, JobAuth]:
    """Make the job's credentials: a new secret in `directory/job.secret` (0600), and TLS
    from `tls_dir` when given; returns the config that points its processes at them."""
    tls = load_tls(tls_dir) if tls_dir else None
    credentials = new_auth(tls)
    path = write_secret(directory, credentials)
    tls_path = str(Path(tls_dir).resolve()) if tls_dir else ""
    return dataclasses.replace(config, secret_file=path.name, tls_dir=tls_path), credentials
