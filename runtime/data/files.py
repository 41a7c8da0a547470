"""Finding record files behind fsspec URLs and globs, with one clear error when none exist."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import fsspec


class DataNotFoundError(FileNotFoundError):
    """No file matches the data location the user gave."""


def _has_magic(path: str) -> bool:
    return any(ch in path for ch in "*?[")


def expand_data_urls(
    locations: str | Iterable[str], storage_options: dict[str, Any] | None = None
) -> list[str]:
    """Expand comma-separated URLs, globs and directories into a sorted list of file URLs.

    A directory stands for the files directly in it, less staging and metadata files: names
    starting with `.` or `_`, and `.json` files (a converted table's `schema.json`). The
    protocol of each input is kept on its outputs, so `gs://b/*.recordio` yields `gs://b/...`
    URLs.
    """
    if isinstance(locations, str):
        locations = [part for part in locations.split(",")]
    found: list[str] = []
    for raw in locations:
        location = raw.strip()
        if not location:
            continue
        fs, path = fsspec.core.url_to_fs(location, **(storage_options or {}))
        if _has_magic(path):
            paths = [p for p in fs.glob(path) if not fs.isdir(p)]
        elif fs.isdir(path):
            paths = [
                entry["name"]
                for entry in fs.ls(path, detail=True)
                if entry["type"] == "file"
                and _is_data_name(entry["name"].rstrip("/").rsplit("/", 1)[-1])
            ]
        elif fs.exists(path):
            paths = [path]
        else:
            paths = []
        if not paths:
            raise DataNotFoundError(
                f"no data file matches {location!r}; check the path or glob "
                "(e.g. --data 'gs://bucket/train/*.recordio')"
            )
        found.extend(_unstrip(fs, p) for p in sorted(paths))
    if not found:
        raise DataNotFoundError("no data location given; pass --data URL_OR_GLOB")
    return found


def _is_data_name(name: str) -> bool:
    return not name.startswith((".", "_")) and not name.endswith(".json")


def _unstrip(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """Put the protocol back on a path that a filesystem returned without it."""
    protocol = fs.protocol[0] if isinstance(fs.protocol, tuple | list) else fs.protocol
    if protocol in ("file", "local"):
        return path
    return fs.unstrip_protocol(path)
