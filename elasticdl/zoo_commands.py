"""`elasticdl zoo init` and `elasticdl zoo package`: a model zoo's image and its build context.

A model zoo runs on a cluster inside an image: the elasticdl runtime image (the repository's
`Dockerfile`) plus the zoo at `/model_zoo` and the zoo's `requirements.txt` installed.

* `init DIR` writes that image's `Dockerfile` (and a `.dockerignore`, and an empty
  `requirements.txt` when there is none) into the zoo directory.
* `package DIR --to URL` packs the zoo directory into a deterministic `.tar.gz` (the same bytes
  for the same files, whatever their mtimes, owners or umask) and uploads it through fsspec, so
  kaniko can build from it with `--context=gs://...`. A URL ending in `/` names the file
  `zoo-<sha256>.tar.gz` after its content, so re-packaging an unchanged zoo uploads nothing.
* `kaniko_context(location)` turns a zoo location (a git URL as `--model_zoo` takes it, or a
  packaged tarball) into kaniko's `--context` value; git zoos need no packaging.

`.dockerignore` rules, as Docker applies them (moby's patternmatcher), are honoured when
packaging: blank lines and `#` comments are skipped; each pattern is relative to DIR (a
leading `/` or `./` and a trailing `/` are dropped); `*` matches within one path component,
`?` one character but `/`, `[a-z]`/`[^a-z]` a class, `**` any number of components, `\\`
escapes; `!PATTERN` re-includes; the last matching pattern wins; a pattern that matches a
directory matches everything in it. Like Docker, `Dockerfile` and `.dockerignore` are always
sent even when excluded (the builder needs them; COPY still leaves them out). Whatever the
rules say, `.git`, `__pycache__` and `*.pyc` are never packed. Only regular files,
directories and symlinks (kept as links) can be packed.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import posixpath
import re
import shutil
import stat
import sys
import tarfile
import tempfile
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elasticdl.runtime.distribution import default_image
from elasticdl.runtime.k8s.manifests import RUNTIME_GID, RUNTIME_UID

DEFAULT_RUNTIME_IMAGE = default_image()
"""The runtime image a zoo's Dockerfile starts FROM unless `--runtime_image` says otherwise."""

RUNTIME_USER = f"{RUNTIME_UID}:{RUNTIME_GID}"
"""The (numeric, so Kubernetes can check runAsNonRoot) user of the runtime image."""

MODEL_ZOO_DIR = "/model_zoo"
RUNTIME_CONSTRAINTS = "/opt/elasticdl/constraints.txt"
"""`pip freeze` of the runtime image: a zoo's requirements may not move these versions."""

FIXED_MTIME = 315532800
"""1980-01-01T00:00:00Z: the mtime of every packed entry (ZIP's epoch; tools accept it)."""

ALWAYS_SENT = ("Dockerfile", ".dockerignore")
CONTEXT_NAME_PREFIX = "zoo-"
CONTEXT_SUFFIX = ".tar.gz"

ZOO_DOCKERIGNORE = """\
# Not copied into the model zoo's image, nor packed by `elasticdl zoo package`.
.git
.venv
**/__pycache__
**/*.pyc
**/.pytest_cache
**/.ipynb_checkpoints
# The builder still receives these two; COPY leaves them out of /model_zoo.
Dockerfile
.dockerignore
"""

EMPTY_REQUIREMENTS = """\
# Python packages this model zoo needs, one per line (pip requirements format). elasticdl,
# TensorFlow and their dependencies are already in the runtime image; versions pinned there
# cannot be changed here.
"""


class ZooCommandError(ValueError):
    """A zoo command cannot go on; the message is one line that says why and what to do."""


# --- image references and the zoo's Dockerfile -------------------------------------------------

_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
_DOMAIN = (
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
)
_IMAGE_REFERENCE = re.compile(
    rf"(?:{_DOMAIN}(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?"
)


def validate_image_reference(image: str) -> str:
    """Return `image` if it is a Docker image reference (`[host[:port]/]name[:tag][@digest]`).

    It is written into a Dockerfile, so anything else (spaces, newlines, quotes) is refused
    rather than trusted.
    """
    if not image or not _IMAGE_REFERENCE.fullmatch(image):
        raise ZooCommandError(
            f"--runtime_image {image!r} is not an image reference like "
            "registry.example.com/elasticdl:0.3 or elasticdl@sha256:<64 hex>"
        )
    return image


def render_zoo_dockerfile(runtime_image: str = DEFAULT_RUNTIME_IMAGE) -> str:
    """The text of a zoo's Dockerfile: FROM the runtime image, the zoo at /model_zoo.

    Also usable without `init` (e.g. mounted into a kaniko pod for a git zoo that has no
    Dockerfile). `RUNTIME_IMAGE` is an ARG so a build can pin the base by digest with
    `--build-arg RUNTIME_IMAGE=image@sha256:...`.
    """
    validate_image_reference(runtime_image)
    return f"""\
# The model zoo's image, written by `elasticdl zoo init`: the elasticdl runtime image, this
# directory at {MODEL_ZOO_DIR}, and its requirements.txt installed within the versions the
# runtime pins. Build with Docker or kaniko; a different base:
#   --build-arg RUNTIME_IMAGE=registry.example.com/elasticdl@sha256:...
ARG RUNTIME_IMAGE={runtime_image}
FROM ${{RUNTIME_IMAGE}}
USER root
COPY requirements.txt {MODEL_ZOO_DIR}/requirements.txt
RUN python -m pip install --no-cache-dir -c {RUNTIME_CONSTRAINTS} \\
    -r {MODEL_ZOO_DIR}/requirements.txt
COPY --chown={RUNTIME_USER} . {MODEL_ZOO_DIR}
USER {RUNTIME_USER}
"""


@dataclass(frozen=True)
class InitResult:
    """What `init_zoo` wrote; `dockerignore_written` is False when an existing one was kept."""

    dockerfile: Path
    dockerignore: Path
    dockerignore_written: bool
    requirements: Path
    requirements_created: bool


def _zoo_directory(directory: str | os.PathLike[str], command: str) -> Path:
    path = Path(directory).expanduser()
    if not path.exists():
        raise ZooCommandError(f"zoo {command}: {str(directory)!r} does not exist")
    if not path.is_dir():
        raise ZooCommandError(
            f"zoo {command}: {str(directory)!r} is not a directory; give the model zoo's folder"
        )
    return path


def _write_text_atomically(path: Path, text: str) -> None:
    staging = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        staging.write_text(text, encoding="utf-8")
        os.replace(staging, path)
    except OSError as err:
        staging.unlink(missing_ok=True)
        raise ZooCommandError(f"zoo init: cannot write {path}: {err.strerror or err}") from err


def init_zoo(
    directory: str | os.PathLike[str],
    runtime_image: str = DEFAULT_RUNTIME_IMAGE,
    force: bool = False,
) -> InitResult:
    """Write DIR/Dockerfile (refusing to replace one unless `force`), DIR/.dockerignore (an
    existing one is kept: it may hold the user's rules) and an empty DIR/requirements.txt
    when there is none, which the Dockerfile always installs from."""
    root = _zoo_directory(directory, "init")
    text = render_zoo_dockerfile(runtime_image)
    dockerfile = root / "Dockerfile"
    if dockerfile.exists() and not force:
        raise ZooCommandError(f"zoo init: {dockerfile} already exists; pass --force to replace it")
    if dockerfile.is_dir():
        raise ZooCommandError(f"zoo init: {dockerfile} is a directory")
    requirements = root / "requirements.txt"
    requirements_created = not requirements.exists()
    if requirements_created:
        _write_text_atomically(requirements, EMPTY_REQUIREMENTS)
    dockerignore = root / ".dockerignore"
    dockerignore_written = not dockerignore.exists()
    if dockerignore_written:
        _write_text_atomically(dockerignore, ZOO_DOCKERIGNORE)
    _write_text_atomically(dockerfile, text)
    return InitResult(
        dockerfile, dockerignore, dockerignore_written, requirements, requirements_created
    )


# --- .dockerignore -----------------------------------------------------------------------------


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """Translate one cleaned .dockerignore pattern to a regex, as moby's patternmatcher does."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "*":
            if i + 1 < n and pattern[i + 1] == "*":
                i += 2
                if i < n and pattern[i] == "/":
                    i += 1
                out.append(".*" if i >= n else "(?:.*/)?")
                continue
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "\\":
            if i + 1 < n:
                i += 1
                out.append(re.escape(pattern[i]))
            else:
                out.append(re.escape("\\"))
        elif ch == "[":
            end = i + 1
            if end < n and pattern[end] == "^":
                end += 1
            if end < n and pattern[end] == "]":
                end += 1
            while end < n and pattern[end] != "]":
                end += 2 if pattern[end] == "\\" else 1
            if end >= n:
                raise ZooCommandError(f".dockerignore: unterminated [ in pattern {pattern!r}")
            body = pattern[i + 1 : end]
            negate = body.startswith("^")
            if negate:
                body = body[1:]
            chars: list[str] = []
            j = 0
            while j < len(body):
                if body[j] == "\\" and j + 1 < len(body):
                    j += 1
                    chars.append(re.escape(body[j]))
                elif body[j] == "-":
                    chars.append("-")
                else:
                    chars.append(re.escape(body[j]))
                j += 1
            out.append("[" + ("^" if negate else "") + "".join(chars) + "]")
            i = end
        else:
            out.append(re.escape(ch))
        i += 1
    try:
        return re.compile("".join(out))
    except re.error as err:
        raise ZooCommandError(f".dockerignore: bad pattern {pattern!r}: {err}") from err


@dataclass(frozen=True)
class _Rule:
    reinclude: bool
    pattern: str
    regex: re.Pattern[str]


class DockerIgnore:
    """The exclusion rules of a `.dockerignore` (see the module docstring for the syntax)."""

    def __init__(self, lines: Iterable[str] = ()) -> None:
        self.rules: list[_Rule] = []
        for raw in lines:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            reinclude = line.startswith("!")
            if reinclude:
                line = line[1:].strip()
            cleaned = posixpath.normpath(line).lstrip("/") if line else ""
            if cleaned in ("", "."):
                continue
            self.rules.append(_Rule(reinclude, cleaned, _pattern_regex(cleaned)))

    @classmethod
    def read(cls, directory: str | os.PathLike[str]) -> DockerIgnore:
        """The rules of DIR/.dockerignore; none when the file does not exist."""
        path = Path(directory) / ".dockerignore"
        if not path.is_file():
            return cls()
        return cls(path.read_text(encoding="utf-8", errors="replace").splitlines())

    def excluded(self, relative_path: str) -> bool:
        """Whether the /-separated path relative to the context root is left out."""
        parts = relative_path.strip("/").split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        excluded = False
        for rule in self.rules:
            if rule.reinclude != excluded:
                continue  # cannot change the outcome
            if any(rule.regex.fullmatch(p) for p in prefixes):
                excluded = not rule.reinclude
        return excluded

    def may_reinclude_under(self, relative_dir: str) -> bool:
        """Whether some `!` rule could re-include a path inside an excluded directory.

        False lets the walk skip the directory (e.g. `.venv`) without visiting it.
        """
        dir_parts = relative_dir.strip("/").split("/")
        for rule in self.rules:
            if not rule.reinclude:
                continue
            parts = rule.pattern.split("/")
            if any("**" in part for part in parts):
                return True
            if len(parts) <= len(dir_parts):
                continue
            if all(_pattern_regex(parts[i]).fullmatch(dir_parts[i]) for i in range(len(dir_parts))):
                return True
        return False


# --- the deterministic build-context archive ---------------------------------------------------


@dataclass(frozen=True)
class ContextArchive:
    """A packed build context: its sha256 (hex) and size, and the packed entry names."""

    sha256: str
    size: int
    entries: tuple[str, ...]
    files: int


def _never_packed(name: str) -> bool:
    return name in (".git", "__pycache__") or name.endswith(".pyc")


def _collect(root: Path, ignore: DockerIgnore) -> dict[str, Path]:
    kept: dict[str, Path] = {}

    def visit(directory: Path, prefix: str) -> None:
        try:
            with os.scandir(directory) as listing:
                items = sorted(listing, key=lambda e: e.name)
        except OSError as err:
            raise ZooCommandError(f"zoo package: cannot read {directory}: {err.strerror}") from err
        for item in items:
            if _never_packed(item.name):
                continue
            rel = f"{prefix}{item.name}"
            keep = rel in ALWAYS_SENT or not ignore.excluded(rel)
            if item.is_dir(follow_symlinks=False):
                if keep:
                    kept[rel] = Path(item.path)
                if keep or ignore.may_reinclude_under(rel):
                    visit(Path(item.path), rel + "/")
            elif keep:
                kept[rel] = Path(item.path)

    visit(root, "")
    # A file re-included inside an excluded directory still needs its parent entries.
    for rel in list(kept):
        parent = posixpath.dirname(rel)
        while parent and parent not in kept:
            kept[parent] = root / parent
            parent = posixpath.dirname(parent)
    return kept


def _tarinfo(name: str, path: Path) -> tuple[tarfile.TarInfo, Path | None]:
    info = tarfile.TarInfo(name)
    info.mtime = FIXED_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        info.type = tarfile.SYMTYPE
        info.linkname = os.readlink(path)
        info.mode = 0o777
        return info, None
    if stat.S_ISDIR(st.st_mode):
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        return info, None
    if stat.S_ISREG(st.st_mode):
        info.type = tarfile.REGTYPE
        info.mode = 0o755 if st.st_mode & stat.S_IXUSR else 0o644
        info.size = st.st_size
        return info, path
    raise ZooCommandError(
        f"zoo package: {path} is not a regular file, directory or symlink; add it to .dockerignore"
    )


def build_context_archive(
    directory: str | os.PathLike[str], output: str | os.PathLike[str]
) -> ContextArchive:
    """Pack DIR, minus what `.dockerignore` excludes, into the .tar.gz file `output`.

    Deterministic: entries in sorted order, mtime FIXED_MTIME, uid/gid 0 without names, mode
    0755 for directories and executables and 0644 otherwise, and a gzip header without name or
    time; so equal trees give equal bytes and the sha256 can name the file.
    """
    root = _zoo_directory(directory, "package")
    ignore = DockerIgnore.read(root)
    kept = _collect(root, ignore)
    names = sorted(kept, key=lambda rel: rel.split("/"))
    files = 0
    with open(output, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for name in names:
                    info, source = _tarinfo(name, kept[name])
                    if source is None:
                        tar.addfile(info)
                        continue
                    try:
                        with open(source, "rb") as handle:
                            tar.addfile(info, handle)
                    except OSError as err:  # unreadable, or shrank while being packed
                        raise ZooCommandError(
                            f"zoo package: cannot read {source}: {err.strerror or err}"
                        ) from err
                    files += 1
    digest = hashlib.sha256()
    size = 0
    with open(output, "rb") as packed:
        for chunk in iter(lambda: packed.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
    return ContextArchive(digest.hexdigest(), size, tuple(names), files)


# --- package: pack and upload ------------------------------------------------------------------


@dataclass(frozen=True)
class PackageResult:
    """Where the context went; `uploaded` is False when that exact object was already there."""

    url: str
    sha256: str
    size: int
    files: int
    uploaded: bool


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _check_dockerfile(root: Path, ignore: DockerIgnore) -> None:
    dockerfile = root / "Dockerfile"
    if not dockerfile.is_file():
        raise ZooCommandError(
            f"zoo package: {root} has no Dockerfile; run `elasticdl zoo init {root}` first"
        )
    text = dockerfile.read_text(encoding="utf-8", errors="replace")
    uses_requirements = re.search(r"^\s*COPY\s+.*\brequirements\.txt\b", text, re.M | re.I)
    if uses_requirements and not (root / "requirements.txt").is_file():
        raise ZooCommandError(
            f"zoo package: {root}/Dockerfile copies requirements.txt but there is none; "
            "create it (it may be empty)"
        )
    if uses_requirements and ignore.excluded("requirements.txt"):
        raise ZooCommandError(
            f"zoo package: {root}/.dockerignore excludes requirements.txt, which the "
            "Dockerfile copies; remove that rule"
        )


def _target(to_url: str, sha256: str, path: str, local: bool) -> tuple[str, str, bool]:
    """(url, fs path, content-addressed) of the object to write."""
    if to_url.endswith("/") or (local and os.path.isdir(path)):
        name = f"{CONTEXT_NAME_PREFIX}{sha256}{CONTEXT_SUFFIX}"
        base = to_url if to_url.endswith("/") else to_url + "/"
        return base + name, posixpath.join(path.rstrip("/"), name), True
    if not to_url.endswith(CONTEXT_SUFFIX):
        raise ZooCommandError(
            f"--to {to_url!r}: end it with '/' (the file is then named after its sha256) or "
            f"with '{CONTEXT_SUFFIX}'"
        )
    return to_url, path, False


def package_zoo(
    directory: str | os.PathLike[str],
    to_url: str,
    storage_options: dict[str, Any] | None = None,
) -> PackageResult:
    """Pack DIR (see `build_context_archive`) and upload it to `to_url` through fsspec.

    DIR must hold a Dockerfile (kaniko reads it from the context). A local target is written
    beside itself and renamed into place; an object store gets one upload, so a failure leaves
    no partial context. A content-addressed target that already exists is not uploaded again.
    """
    root = _zoo_directory(directory, "package")
    if not to_url:
        raise ZooCommandError("zoo package: --to URL is required, e.g. gs://BUCKET/contexts/")
    _check_dockerfile(root, DockerIgnore.read(root))
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(to_url, **(storage_options or {}))
    except (ValueError, ImportError) as err:
        raise ZooCommandError(f"--to {to_url!r}: {_one_line(err)}") from err
    protocol = fs.protocol[0] if isinstance(fs.protocol, tuple | list) else fs.protocol
    local = protocol in ("file", "local")
    with tempfile.TemporaryDirectory(prefix="elasticdl-zoo-") as scratch:
        packed = Path(scratch) / "context.tar.gz"
        archive = build_context_archive(root, packed)
        url, target, addressed = _target(to_url, archive.sha256, path, local)
        try:
            if addressed and fs.exists(target) and fs.size(target) == archive.size:
                return PackageResult(url, archive.sha256, archive.size, archive.files, False)
            if local:
                destination = Path(target)
                destination.parent.mkdir(parents=True, exist_ok=True)
                staging = destination.with_name(
                    f".{destination.name}.partial-{uuid.uuid4().hex[:8]}"
                )
                try:
                    shutil.copyfile(packed, staging)
                    os.replace(staging, destination)
                finally:
                    staging.unlink(missing_ok=True)
            else:
                # No makedirs: object stores need no folders, and gcsfs would create a bucket.
                fs.put_file(str(packed), target)
        except ZooCommandError:
            raise
        except Exception as err:  # fsspec back ends raise their own types
            hint = ""
            if isinstance(err, FileNotFoundError):
                hint = " (does the bucket exist?)"
            elif isinstance(err, PermissionError):
                hint = " (permission denied: check the credentials)"
            raise ZooCommandError(
                f"zoo package: cannot write {url}{hint}: {type(err).__name__}: {_one_line(err)}"
            ) from err
    return PackageResult(url, archive.sha256, archive.size, archive.files, True)


# --- kaniko's --context ------------------------------------------------------------------------

_FULL_SHA = re.compile(r"[0-9a-fA-F]{40}")
_SHORT_SHA = re.compile(r"[0-9a-fA-F]{7,39}")
_BAD_REF = re.compile(r"[\s~^:?*\[\\#]|\.\.|@\{|^-|^/|/$|\.lock$|//")
_SCP_LIKE = re.compile(r"^[\w.-]+@[\w.-]+:")


def _split_scheme(location: str) -> tuple[str, str]:
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", location)
    if not match:
        return "", location
    return match.group(1).lower(), match.group(2)


def _kaniko_ref(ref: str, location: str) -> str:
    if not ref:
        return ""
    if _BAD_REF.search(ref):
        raise ZooCommandError(f"{location!r}: {ref!r} is not a git branch, tag or commit")
    if ref.startswith("refs/"):
        return ref
    if _FULL_SHA.fullmatch(ref):
        return ref.lower()
    if _SHORT_SHA.fullmatch(ref):
        raise ZooCommandError(
            f"{location!r}: kaniko needs a full 40-character commit hash, not {ref!r} "
            f"(for a branch with that name write @refs/heads/{ref})"
        )
    return f"refs/heads/{ref}"


def _git_context(location: str) -> str:
    url = location[4:] if location.startswith("git+") else location
    scheme, rest = _split_scheme(url)
    if scheme == "file":
        raise ZooCommandError(
            f"{location!r}: kaniko in the cluster cannot read a repository on this machine; "
            "push it to a git server, or package the checkout with `elasticdl zoo package`"
        )
    if scheme not in ("http", "https", "git"):
        raise ZooCommandError(
            f"{location!r}: kaniko clones git contexts over https (or http); give an "
            "https:// URL and the credentials as GIT_TOKEN or GIT_USERNAME/GIT_PASSWORD"
        )
    if scheme == "git" and "#" in rest:
        return location  # already kaniko's git://HOST/PATH#REF[#COMMIT]
    if "#" in rest:
        raise ZooCommandError(
            f"{location!r}: URL fragments (#subdirectory=...) are not supported; use kaniko's "
            "--context-sub-path"
        )
    host, _, path = rest.partition("/")
    if "@" in host:
        raise ZooCommandError(
            f"{location!r}: do not put credentials in the URL; give kaniko GIT_TOKEN or "
            "GIT_USERNAME/GIT_PASSWORD from a Kubernetes secret"
        )
    ref = ""
    if "@" in path:
        path, ref = path.rsplit("@", 1)
    if not host or not path.strip("/"):
        raise ZooCommandError(f"{location!r}: a git URL needs a host and a repository path")
    kaniko_ref = _kaniko_ref(ref, location)
    return f"git://{host}/{path}" + (f"#{kaniko_ref}" if kaniko_ref else "")


def kaniko_context(zoo_location: str) -> str:
    """kaniko's `--context` for a model zoo that is not on the builder's disk.

    * git URLs as `--model_zoo` takes them (`git+https://host/zoo.git@main`,
      `https://host/zoo.git`, `...@<40-hex commit>`, `...@refs/tags/v1`) become kaniko's
      `git://host/zoo.git[#refs/heads/main | #<commit> | #refs/tags/v1]` (kaniko clones it over
      https; `kaniko_env` says when http is needed). A plain `@NAME` is a branch; write
      `@refs/tags/NAME` for a tag. kaniko forms (`git://...#...`) pass through.
    * a packaged context (`gs://` or `s3://` `.tar.gz`, or an https Azure blob `.tar.gz`) is
      returned as it is.

    Local directories, ssh/file git URLs, credentials in URLs and the built-in zoo (already
    in the runtime image) are refused with a ZooCommandError saying what to use instead.
    """
    location = zoo_location.strip()
    if not location:
        raise ZooCommandError("kaniko context: the model zoo location is empty")
    if location == "builtin":
        raise ZooCommandError(
            "the built-in model zoo is part of the runtime image; run that image, no build needed"
        )
    scheme, rest = _split_scheme(location)
    if scheme in ("gs", "s3") or (scheme == "https" and location.endswith(CONTEXT_SUFFIX)):
        if not location.endswith(CONTEXT_SUFFIX) or not rest.strip("/"):
            raise ZooCommandError(
                f"{location!r}: kaniko reads a .tar.gz build context from object storage; "
                "create one with `elasticdl zoo package DIR --to gs://BUCKET/contexts/`"
            )
        return location
    if location.startswith("git+") or scheme in ("http", "https", "git", "ssh", "file"):
        return _git_context(location)
    if _SCP_LIKE.match(location):
        raise ZooCommandError(
            f"{location!r}: kaniko cannot clone over ssh; give the https:// URL and the "
            "credentials as GIT_TOKEN or GIT_USERNAME/GIT_PASSWORD"
        )
    raise ZooCommandError(
        f"{location!r} is not a git URL nor a packaged context; upload a local zoo with "
        "`elasticdl zoo package DIR --to gs://BUCKET/contexts/` and use the URL it prints"
    )


def kaniko_env(zoo_location: str) -> dict[str, str]:
    """Environment the kaniko container needs for `kaniko_context(zoo_location)`.

    kaniko clones `git://` contexts over https unless GIT_PULL_METHOD=http.
    """
    location = zoo_location.strip()
    url = location[4:] if location.startswith("git+") else location
    scheme, _ = _split_scheme(url)
    return {"GIT_PULL_METHOD": "http"} if scheme == "http" else {}


# --- command line ------------------------------------------------------------------------------


def add_arguments_init(parser: argparse.ArgumentParser) -> None:
    """Flags of `elasticdl zoo init`."""
    parser.add_argument("directory", metavar="DIR", help="the model zoo's folder")
    parser.add_argument(
        "--runtime_image",
        default=DEFAULT_RUNTIME_IMAGE,
        metavar="IMAGE",
        help=f"the elasticdl runtime image the zoo's image starts FROM (default: "
        f"{DEFAULT_RUNTIME_IMAGE})",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing DIR/Dockerfile")


def add_arguments_package(parser: argparse.ArgumentParser) -> None:
    """Flags of `elasticdl zoo package`."""
    parser.add_argument(
        "directory", metavar="DIR", help="the model zoo's folder (with a Dockerfile)"
    )
    parser.add_argument(
        "--to",
        required=True,
        metavar="URL",
        help="where the .tar.gz goes (any fsspec URL); ending in '/' names it "
        "zoo-<sha256>.tar.gz, e.g. gs://BUCKET/contexts/",
    )


def add_zoo_init_and_package(zoo_subparsers: argparse._SubParsersAction) -> None:
    """Add `init` and `package` to the `elasticdl zoo` subcommands.

    Each sets `zoo_run` (run_init or run_package) as a default, so the caller can dispatch
    with `return args.zoo_run(args)`.
    """
    init = zoo_subparsers.add_parser(
        "init",
        help="write the zoo's Dockerfile (FROM the runtime image, the zoo at /model_zoo)",
        description="Write DIR/Dockerfile for the model zoo's image: FROM the elasticdl runtime "
        "image, DIR copied to /model_zoo, DIR/requirements.txt installed (an empty one is "
        "created when missing); also DIR/.dockerignore when there is none.",
    )
    add_arguments_init(init)
    init.set_defaults(zoo_run=run_init)
    package = zoo_subparsers.add_parser(
        "package",
        help="upload the zoo's build context as a deterministic .tar.gz (for kaniko)",
        description="Pack DIR (minus .dockerignore's exclusions, .git, __pycache__, *.pyc) "
        "into a deterministic .tar.gz and upload it through fsspec; kaniko builds from it "
        "with --context=URL. Git zoos need no packaging: kaniko clones them.",
    )
    add_arguments_package(package)
    package.set_defaults(zoo_run=run_package)


def _fail(err: ZooCommandError) -> int:
    print(f"elasticdl: error: {err}", file=sys.stderr)
    return 2


def run_init(args: argparse.Namespace) -> int:
    """`elasticdl zoo init DIR [--runtime_image IMAGE] [--force]`; returns the exit status."""
    try:
        result = init_zoo(args.directory, args.runtime_image, force=args.force)
    except ZooCommandError as err:
        return _fail(err)
    print(f"wrote {result.dockerfile} (FROM {args.runtime_image})")
    verb = "wrote" if result.dockerignore_written else "kept"
    print(f"{verb} {result.dockerignore}")
    if result.requirements_created:
        print(f"created {result.requirements} (empty: list the zoo's Python packages there)")
    print(f"next: elasticdl zoo package {args.directory} --to gs://BUCKET/contexts/")
    return 0


def run_package(args: argparse.Namespace) -> int:
    """`elasticdl zoo package DIR --to URL`: prints the URL, then `sha256:<hex>`, then a note."""
    try:
        result = package_zoo(args.directory, args.to)
    except ZooCommandError as err:
        return _fail(err)
    print(result.url)
    print(f"sha256:{result.sha256}")
    state = "uploaded" if result.uploaded else "already there, not uploaded again"
    print(f"{result.files} file(s), {result.size} bytes, {state}; kaniko: --context={result.url}")
    return 0
