"""This project's distribution name, how to install an extra of it, and ElasticDL 0.2 beside it.

The import package is `elasticdl` (model files import it), but the distribution is
`elasticdl-argo`: on PyPI, `elasticdl` is ElasticDL 0.2 (0.2.0rc3, 2020), another program with
the same import package, and `elasticdl-client`, `elasticdl-api` and `elasticdl-preprocessing`
are its parts. Installed in one environment, ElasticDL 0.2 and this project overwrite each
other's files under `elasticdl/`, and `elasticdl-client` installs an `elasticdl` command of its
own; `conflicts()` finds them by their distribution metadata, for the command line to say so in
one line.
"""

from __future__ import annotations

import importlib.metadata as metadata
import re

DISTRIBUTION = "elasticdl-argo"
"""The name this project installs under (pyproject.toml's `project.name`)."""

IMAGE_REPOSITORY = "elasticdl/elasticdl"
"""Where the runtime image (the Dockerfile's) is published, tagged with the release version."""

ELASTICDL_02 = "elasticdl"
"""ElasticDL 0.2's distribution: its versions are 0.1.x and 0.2.x."""
ELASTICDL_02_PARTS = ("elasticdl-client", "elasticdl-preprocessing", "elasticdl-api")
"""Distributions of ElasticDL 0.2's project (`elasticdl-client` has an `elasticdl` command)."""
_FIRST_OURS = (0, 3)
"""An `elasticdl` distribution from this version on is this project under its former name."""


def _release(version: str) -> tuple[int, ...]:
    try:
        return tuple(int(n) for n in release_version(version).split("."))
    except ValueError:
        return ()


def release_version(version: str) -> str:
    """The release a version is or leads to: 0.3.0 for 0.3.0, 0.3.0.dev0 and 0.3.0rc1."""
    numbers = re.match(r"\d+(\.\d+)*", version)
    if numbers is None:
        raise ValueError(f"{version!r} is not a release version")
    return numbers.group(0)


def default_image() -> str:
    """The runtime image of this version's release: steps that need no model zoo run in it,
    and a zoo's image starts FROM it. A development version names the release it leads to (a
    `.dev0` tag is never published)."""
    from elasticdl import __version__

    return f"{IMAGE_REPOSITORY}:{release_version(__version__)}"


def conflicts(path: list[str] | None = None) -> list[str]:
    """`name version` of each ElasticDL 0.2 distribution installed on `path` (default:
    sys.path), found by name: a few directory look-ups, no scan of every distribution."""
    found = set()
    for name in (ELASTICDL_02, *ELASTICDL_02_PARTS):
        kwargs = {"name": name} if path is None else {"name": name, "path": path}
        for dist in metadata.distributions(**kwargs):
            if name != ELASTICDL_02 or _release(dist.version) < _FIRST_OURS:
                found.add(f"{name} {dist.version}")
    return sorted(found)


def conflict_message(found: list[str]) -> str:
    """One line: what is installed beside this project, and how to get a clean install."""
    names = " ".join(item.split()[0] for item in found)
    return (
        f"ElasticDL 0.2 is installed in this environment too ({', '.join(found)}): it uses the "
        f"same import package 'elasticdl' and command, so the two overwrite each other's "
        f"files; run `pip uninstall {names}` and then reinstall {DISTRIBUTION} with "
        "`pip install --force-reinstall --no-deps` from its wheel or repository"
    )


def extra_hint(extra: str) -> str:
    """How to install the packages of `extra`: `pip install 'pkg>=x' ...` as declared in
    this distribution's metadata, naming the extra."""
    try:
        requires = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        requires = []
    marker = re.compile(rf""";\s*extra\s*==\s*["']{re.escape(extra)}["']\s*$""")
    packages = [marker.split(r)[0].strip() for r in requires if marker.search(r)]
    if not packages:
        return f"install the '{extra}' extra of {DISTRIBUTION}"
    quoted = " ".join(f"'{p.replace(' ', '')}'" for p in packages)
    return f"pip install {quoted} (the '{extra}' extra of {DISTRIBUTION})"
