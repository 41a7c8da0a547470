"""Where a model zoo lives: the built-in zoo, a local directory, or a git repository.

A git zoo (`git+https://host/repo.git`, `https://host/repo.git`, `git+file:///srv/zoo.git`,
optionally `@REF` for a branch, tag or commit) is cloned once into a cache directory and
refreshed on later use; when the refresh fails (offline), the cached copy is used with a
warning. Git runs with an argv list and `--` before the URL, never through a shell.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

BUILTIN = "builtin"
_GIT_TIMEOUT_S = 300


class ZooSourceError(ValueError):
    """The model zoo location is unusable; the message says why and what to do."""


@dataclass(frozen=True)
class ZooSource:
    """A model zoo resolved to a local directory.

    `url` is what the user gave (or "builtin"); `commit` is the git commit for a git zoo.
    """

    root: Path
    url: str
    commit: str = ""

    @property
    def is_builtin(self) -> bool:
        return self.url == BUILTIN


def builtin_zoo_root() -> Path:
    """Directory of the zoo shipped with the package (`model_zoo/` in the repository)."""
    import elasticdl.model_zoo as zoo

    return Path(zoo.__file__).resolve().parent


def default_cache_dir() -> Path:
    """`$ELASTICDL_CACHE_DIR/zoos`, else `~/.cache/elasticdl/zoos`."""
    base = os.environ.get("ELASTICDL_CACHE_DIR")
    root = Path(base) if base else Path.home() / ".cache" / "elasticdl"
    return root / "zoos"


def is_git_url(location: str) -> bool:
    """True for `git+...` URLs and for http(s)/ssh/git URLs ending in `.git` (optional @ref)."""
    if location.startswith("git+"):
        return True
    url, _ = split_git_ref(location)
    return bool(re.match(r"^(https?|ssh|git)://", url)) and url.rstrip("/").endswith(".git")


def split_git_ref(location: str) -> tuple[str, str]:
    """Split `URL[@REF]` (pip style) into the clone URL and the ref ('' for the default)."""
    url = location[4:] if location.startswith("git+") else location
    scheme_end = url.find("://")
    at = url.rfind("@")
    if at > scheme_end + 3 and "/" not in url[at:]:
        return url[:at], url[at + 1 :]
    return url, ""


def _git(args: list[str], cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            check=True,
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )
    except FileNotFoundError as err:
        raise ZooSourceError("a git model zoo needs the `git` program; install git") from err
    except subprocess.TimeoutExpired as err:
        raise ZooSourceError(f"git {args[0]} timed out after {_GIT_TIMEOUT_S}s") from err
    except subprocess.CalledProcessError as err:
        raise ZooSourceError(f"git {args[0]} failed: {err.stderr.strip()}") from err
    return done.stdout.strip()


def _checkout(repo: Path, url: str, ref: str) -> None:
    _git(["fetch", "--depth", "1", "--quiet", "origin", ref or "HEAD"], cwd=repo)
    _git(["checkout", "--quiet", "--force", "FETCH_HEAD"], cwd=repo)


def fetch_git_zoo(location: str, cache_dir: Path | None = None) -> ZooSource:
    """Clone (or refresh) a git model zoo into the cache and return it."""
    url, ref = split_git_ref(location)
    if not url or url.startswith("-"):
        raise ZooSourceError(f"--model_zoo: {location!r} is not a git URL")
    cache = cache_dir or default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(f"{url}@{ref}".encode()).hexdigest()[:16]
    target = cache / key
    if target.exists():
        try:
            _checkout(target, url, ref)
        except ZooSourceError as err:
            log.warning("could not refresh model zoo %s (%s); using the cached copy", url, err)
    else:
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=cache))
        try:
            _git(["init", "--quiet", str(staging)])
            _git(["remote", "add", "origin", "--", url], cwd=staging)
            _checkout(staging, url, ref)
            try:
                staging.rename(target)
            except OSError:
                if not target.exists():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    commit = _git(["rev-parse", "HEAD"], cwd=target)
    return ZooSource(root=target, url=location, commit=commit)


def resolve_zoo(model_zoo: str | None, cache_dir: Path | None = None) -> ZooSource:
    """Turn `--model_zoo` (None or "builtin", a directory, or a git URL) into a ZooSource."""
    if model_zoo is None or model_zoo in ("", BUILTIN):
        return ZooSource(root=builtin_zoo_root(), url=BUILTIN)
    if is_git_url(model_zoo):
        return fetch_git_zoo(model_zoo, cache_dir)
    path = Path(model_zoo[7:] if model_zoo.startswith("file://") else model_zoo).expanduser()
    if not path.is_dir():
        raise ZooSourceError(
            f"--model_zoo: {model_zoo!r} is not a directory nor a git URL "
            "(git URLs look like git+https://host/repo.git or https://host/repo.git)"
        )
    return ZooSource(root=path.resolve(), url=str(path.resolve()))
