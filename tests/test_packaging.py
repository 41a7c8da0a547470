"""Packaging: the wheel holds every package, and a plain install (no extras) runs every command.

Installing the project (`pip install .`, or its wheel) installs the declared dependencies and
what they require, nothing more.
The wheel test emulates exactly that without downloading anything: it installs the built wheel
into a fresh virtual environment with `--no-deps`, puts this environment's packages on its path
and blocks the import of every package outside the closure of the declared dependencies (the
dev extra's scikit-learn, pytest, kubernetes-validate...), then runs the commands a new user
runs first. The static test beside it checks that each third-party import of the sources is in
that closure.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import json
import re
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement

from elasticdl.zoo_commands import build_context_archive

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
NAME = PYPROJECT["project"]["name"]
DATA_PACKAGES = {"elasticdl.workflows.schemas"}
"""Folders without __init__.py that ship package data (listed, so setuptools does not warn)."""
SOURCE_FOLDERS = (
    "elasticdl",
    "runtime",
    "steps",
    "workflows",
    "proto",
    "model_zoo",
    "elasticdl_preprocessing",
)
OWN_PACKAGES = ("elasticdl", "elasticdl_preprocessing")
OPTIONAL_IMPORTS = {"kubernetes_validate": "lint", "tf_keras": "keras2", "pyarrow": "parquet"}
"""Imports the sources guard, naming the extra that provides them."""
SAME_CODE = {"tensorflow": ("tensorflow", "tensorflow-cpu")}
"""A declared distribution and the ones that install the same modules (the dev venv takes
tensorflow-cpu: scripts/setup.sh)."""


def test_every_package_folder_is_listed_in_pyproject():
    config = PYPROJECT["tool"]["setuptools"]
    listed = set(config["packages"])
    roots = {name: ROOT / folder for name, folder in config["package-dir"].items()}
    found = set(DATA_PACKAGES)
    for name, folder in roots.items():
        for init in folder.rglob("__init__.py"):
            relative = init.parent.relative_to(folder).parts
            if "__pycache__" in relative or any(part.startswith(".") for part in relative):
                continue
            found.add(".".join((name, *relative)))
    assert found == listed, "add/remove these in [tool.setuptools] packages of pyproject.toml"


def test_the_distribution_has_a_name_of_its_own_and_says_when_elasticdl_02_is_beside_it(
    tmp_path,
):
    """PyPI's `elasticdl` is ElasticDL 0.2, with the same import package: this project installs
    as `elasticdl-argo`, and the command line says in one line when ElasticDL 0.2's
    distributions (found by their metadata) share its environment."""
    from elasticdl.runtime.distribution import DISTRIBUTION, conflicts

    assert NAME == DISTRIBUTION and md.version(DISTRIBUTION) == PYPROJECT["project"]["version"]
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    _dist_info(ours, "elasticdl", "0.3.0.dev0")  # this project under its former name
    assert conflicts([str(tmp_path / "empty"), str(ours)]) == []
    _dist_info(theirs, "elasticdl", "0.2.0rc3")
    _dist_info(theirs, "elasticdl_client", "1.0.0")
    assert conflicts([str(theirs)]) == ["elasticdl 0.2.0rc3", "elasticdl-client 1.0.0"]
    done = subprocess.run(
        [sys.executable, "-P", "-m", "elasticdl", "--version"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(theirs)},
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.startswith("elasticdl ")
    (line,) = done.stderr.splitlines()
    assert line == (
        "elasticdl: warning: ElasticDL 0.2 is installed in this environment too (elasticdl "
        "0.2.0rc3, elasticdl-client 1.0.0): it uses the same import package 'elasticdl' and "
        "command, so the two overwrite each other's files; run `pip uninstall elasticdl "
        "elasticdl-client` and then reinstall elasticdl-argo with `pip install "
        "--force-reinstall --no-deps` from its wheel or repository"
    )


def _dist_info(site: Path, name: str, version: str) -> None:
    """What pip records of an installed distribution: its METADATA, which names it."""
    folder = site / f"{name}-{version}.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_proto_folder_is_a_regular_package_and_generated_code_is_present():
    assert (ROOT / "proto" / "__init__.py").exists()
    assert (ROOT / "proto" / "elasticdl_pb2.py").exists()


# -- the closure of the declared dependencies --------------------------------------------------


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _installed(name: str) -> md.Distribution | None:
    for candidate in SAME_CODE.get(_name(name), (name,)):
        try:
            return md.distribution(candidate)
        except md.PackageNotFoundError:
            continue
    return None


def _requirement_applies(requirement: Requirement, extras: set[str]) -> bool:
    if requirement.marker is None:
        return True
    marker: Marker = requirement.marker
    return any(marker.evaluate({"extra": extra}) for extra in extras or {""})


def dependency_closure(requirements: list[str]) -> dict[str, md.Distribution]:
    """The installed distributions a plain `pip install` of `requirements` brings, by name."""
    found: dict[str, md.Distribution] = {}
    todo = [(Requirement(text), set()) for text in requirements]
    while todo:
        requirement, _ = todo.pop()
        dist = _installed(requirement.name)
        assert dist is not None, f"{requirement.name} is declared but not installed here"
        key = _name(requirement.name)
        extras = set(requirement.extras)
        seen_key = (key, frozenset(extras))
        if seen_key in found:
            continue
        found[seen_key] = dist  # type: ignore[index]
        for text in dist.requires or ():
            child = Requirement(text)
            if _requirement_applies(child, extras):
                todo.append((child, set(child.extras)))
    return {_name(dist.metadata["Name"]): dist for dist in found.values()}


def top_level_modules(dist: md.Distribution) -> set[str]:
    names = set()
    for file in dist.files or ():
        first = file.parts[0]
        if len(file.parts) == 1:  # a module file: foo.py, _foo.cpython-311-x86_64-linux-gnu.so
            if first.endswith((".py", ".so")):
                names.add(first.split(".")[0])
        elif not first.endswith((".dist-info", ".egg-info", ".data")) and first not in (
            "..",
            "__pycache__",
        ):
            names.add(first)
    return names


def _third_party_imports() -> dict[str, set[str]]:
    zoo_local = {p.name for p in (ROOT / "model_zoo").iterdir() if p.is_dir()}
    found: dict[str, set[str]] = {}
    for folder in SOURCE_FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top in sys.stdlib_module_names or top in zoo_local or top in OWN_PACKAGES:
                        continue
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_third_party_import_is_a_declared_dependency():
    closure = dependency_closure(PYPROJECT["project"]["dependencies"])
    provided = set().union(*(top_level_modules(d) for d in closure.values()))
    extras = PYPROJECT["project"]["optional-dependencies"]
    missing = {}
    for module, files in _third_party_imports().items():
        if module in provided:
            continue
        extra = OPTIONAL_IMPORTS.get(module)
        if extra is not None:
            assert any(_name(module.replace("_", "-")) in _name(r) for r in extras[extra])
            continue
        missing[module] = sorted(files)
    assert not missing, f"imported but not in the declared dependencies: {missing}"
    assert "scikit-learn" not in closure and "scipy" not in closure  # 195 MB for 57 KB of data


# -- the wheel, installed without extras -------------------------------------------------------

_BLOCKER = '''"""From tests/test_packaging.py: what installing the project would not install."""
import importlib.abc
import sys

BLOCKED = frozenset({blocked!r})


class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
'''


@pytest.fixture(scope="module")
def plain_install(tmp_path_factory) -> Path:
    """A fresh venv with the built wheel and exactly the declared dependencies importable;
    its bin directory."""
    base = tmp_path_factory.mktemp("plain")
    # What the runtime image builds from (setuptools writes build/ beside the sources).
    build_context_archive(ROOT, base / "context.tar.gz")
    with tarfile.open(base / "context.tar.gz") as tar:
        tar.extractall(base / "src", filter="data")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(base / "dist"), str(base / "src")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    assert "Warning" not in build.stderr, build.stderr[-3000:]  # setuptools' deprecations
    (wheel,) = (base / "dist").glob(f"{NAME.replace('-', '_')}-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
        + ["--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            text=True,
        ).strip()
    )
    closure = dependency_closure(PYPROJECT["project"]["dependencies"])
    allowed = set().union(*(top_level_modules(d) for d in closure.values()))
    locations = {str(Path(str(d.locate_file(""))).resolve()) for d in closure.values()}
    blocked = set()
    for dist in md.distributions():
        if _name(dist.metadata["Name"]) in closure or _name(dist.metadata["Name"]) == NAME:
            continue
        blocked |= top_level_modules(dist) - allowed
    blocked -= set(sys.stdlib_module_names) | {"_distutils_hack"}
    (site / "_plain_install.py").write_text(_BLOCKER.format(blocked=sorted(blocked)))
    # Plain path lines (no .pth of those folders runs: an editable elasticdl stays out).
    (site / "zz_plain_install.pth").write_text(
        "import _plain_install\n" + "".join(f"{p}\n" for p in sorted(locations))
    )
    return venv / "bin"


def _run(bin_dir: Path, *argv: str, cwd: Path, timeout: float = 240) -> str:
    done = subprocess.run(
        [str(bin_dir / "elasticdl"), *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "TF_CPP_MIN_LOG_LEVEL": "2", "HOME": str(cwd)},
    )
    assert done.returncode == 0, f"elasticdl {' '.join(argv)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


@pytest.mark.slow
def test_the_wheel_without_extras_runs_the_first_commands(plain_install, tmp_path):
    bin_dir = plain_install
    probe = subprocess.run(
        [str(bin_dir / "python"), "-c", "import elasticdl, sklearn"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert "No module named 'sklearn'" in probe.stderr  # the emulation holds
    where = subprocess.check_output(
        [str(bin_dir / "python"), "-c", "import elasticdl; print(elasticdl.__file__)"],
        text=True,
        cwd=tmp_path,
    )
    assert where.startswith(str(bin_dir.parent)), where  # the wheel, not the sources

    out = _run(bin_dir, "data", "gen", "digits", "--output", "digits", "--num_records", "300",
               cwd=tmp_path)  # fmt: skip
    assert "wrote 300 digits record(s)" in out
    _run(bin_dir, "data", "gen", "regression", "--output", "data", "--num_records", "600",
         "--records_per_file", "300", cwd=tmp_path)  # fmt: skip
    out = _run(bin_dir, "train", "--model_def", "regressor.DNN", "--data", "data",
               "--validation_data", "data", "--output", "model", "--num_workers", "1",
               "--records_per_task", "300", cwd=tmp_path)  # fmt: skip
    report = json.loads((tmp_path / "model" / "job_report.json").read_text())
    assert report["status"] == "succeeded" and report["records"]["trained"] == 600, out
    assert report["metrics"]["mse"] < 11.5  # half the label's variance (23): it learned
    out = _run(bin_dir, "predict", "--data", "data", "--trained_model", "model",
               "--output", "predictions", "--num_workers", "1", cwd=tmp_path)  # fmt: skip
    assert "600 prediction row(s)" in out
    out = _run(bin_dir, "render", "train", "--model_def", "regressor.DNN",
               "--data", "gs://b/data", "--output", "gs://b/m", "--image", "zoo:1",
               cwd=tmp_path)  # fmt: skip
    assert "kind: Workflow" in out
