"""Test helper: a throwaway Google Cloud Storage served by gcp-storage-emulator on 127.0.0.1.

    with gcs_emulator() as gcs:
        gcs.fs.pipe(f"{gcs.bucket}/a.bin", b"...")           # a configured gcsfs.GCSFileSystem
        fsspec.open(gcs.url("a.bin"), **gcs.storage_options)  # gs:// URL through fsspec

The emulator runs in-memory in a daemon thread of this process on an ephemeral port; every
wait is bounded. While the context is open, STORAGE_EMULATOR_HOST points at it, so plain
``gs://`` URLs without storage_options also reach the emulator.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

# Must be set before gcsfs is imported: its experimental zonal/HNS file system probes real
# GCS metadata on every call and stalls about 60 s per call against the emulator.
os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"

import fsspec  # noqa: E402
import gcsfs.core  # noqa: E402
from gcp_storage_emulator.server import create_server  # noqa: E402

START_TIMEOUT_S = 10.0


@dataclass
class GCSEmulator:
    """A running emulator: its endpoint, a bucket that exists, and a gcsfs bound to it."""

    endpoint_url: str
    bucket: str
    project: str
    fs: gcsfs.core.GCSFileSystem
    _server: Any = field(repr=False, default=None)

    @property
    def storage_options(self) -> dict[str, Any]:
        """fsspec storage_options that reach this emulator for gs:// URLs."""
        return {"endpoint_url": self.endpoint_url, "token": "anon", "project": self.project}

    def url(self, key: str) -> str:
        """The gs:// URL of `key` in the bucket."""
        return f"gs://{self.bucket}/{key.lstrip('/')}"

    def wipe(self) -> None:
        """Delete every object and bucket, then re-create the bucket."""
        self._server.wipe()
        self.fs.invalidate_cache()
        self.fs.mkdir(self.bucket)


def _wait_listening(host: str, port: int, deadline: float) -> None:
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"gcp-storage-emulator did not listen on {host}:{port}"
                ) from None
            time.sleep(0.02)


def _quiet_disconnects(httpd: Any) -> None:
    # gcsfs may drop a download connection early (e.g. a cancelled prefetch); the emulator's
    # socketserver then prints a BrokenPipeError traceback to stderr. That is noise, not failure.
    original = httpd.handle_error

    def handle_error(request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            original(request, client_address)

    httpd.handle_error = handle_error


def _ensure_core_gs_filesystem() -> None:
    # If gcsfs was imported before this module with the experimental flag on, fsspec would
    # resolve gs:// to the stalling class; point it at the core implementation instead.
    if fsspec.get_filesystem_class("gs") is not gcsfs.core.GCSFileSystem:
        fsspec.register_implementation("gs", gcsfs.core.GCSFileSystem, clobber=True)


@contextlib.contextmanager
def gcs_emulator(
    bucket: str = "test-bucket", project: str = "test-project"
) -> Iterator[GCSEmulator]:
    """Start an in-memory emulator on a free loopback port, create `bucket`, yield, stop."""
    _ensure_core_gs_filesystem()
    host = "127.0.0.1"
    server = create_server(host, 0, in_memory=True)  # port 0: the OS picks a free port
    server._api.daemon = True  # never keep the interpreter alive
    deadline = time.monotonic() + START_TIMEOUT_S
    server._api.start()
    if not server._api.is_running.wait(START_TIMEOUT_S):
        raise TimeoutError("gcp-storage-emulator thread did not start")
    httpd = server._api._httpd
    port = httpd.server_address[1]
    _quiet_disconnects(httpd)
    _wait_listening(host, port, deadline)
    endpoint = f"http://{host}:{port}"
    old_env = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ["STORAGE_EMULATOR_HOST"] = endpoint
    try:
        # skip_instance_cache: a fresh client per emulator (ports differ between runs).
        fs = gcsfs.core.GCSFileSystem(
            endpoint_url=endpoint,
            token="anon",
            project=project,
            skip_instance_cache=True,
            requests_timeout=10,
        )
        fs.mkdir(bucket)
        yield GCSEmulator(endpoint, bucket, project, fs, server)
    finally:
        if old_env is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = old_env
        httpd.shutdown()
        httpd.server_close()
