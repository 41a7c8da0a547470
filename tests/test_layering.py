"""The layers import only downward, checked statically over the source tree.

Layers, top to bottom (pyproject.toml maps the folders into the one `elasticdl` package):

    front end   elasticdl/*.py        the CLI, the command modules, the Python API
    workflows   workflows/ -> elasticdl.workflows   pipeline definitions, the two engines
    steps       steps/     -> elasticdl.steps       one module per pipeline step
    runtime     runtime/   -> elasticdl.runtime     the elastic job
    proto       proto/     -> elasticdl.proto       generated messages and services

A module may import its own layer and any layer below it, never one above: runtime must not
import the front end or workflows (or steps), steps must not import workflows or the front
end's command modules, workflows must not import the front end, and proto imports nothing of
the project at all.

Contract modules may be imported from every layer (except proto): they are dependency-free
types and shims that users' model files and every process need:

* `elasticdl.mode` (Mode) and `elasticdl.spec` (ElasticDLSpec), the model-zoo contract;
* `elasticdl.python.*`, the ElasticDL v0.2 compatibility path of model files;
* `elasticdl.runtime.tf_quiet`, installed by the package root before TensorFlow loads;
* the package root `elasticdl` itself, for `__version__`, `Mode` and `ElasticDLSpec` only
  (`from elasticdl import train` from below would be the front end through the back door).

The scan reads every `import` and `from ... import` (function-local ones too, and relative
ones resolved against the module's package) plus `importlib.import_module("literal")` calls;
`elasticdl.model_zoo` (shipped data, loaded by path) is no layer and is not checked.
"""

from __future__ import annotations

import ast
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "elasticdl"
LAYERS = ("proto", "runtime", "steps", "workflows", "front end")
"""Bottom to top: a layer may import those at or below its own position."""
CONTRACT = ("elasticdl.mode", "elasticdl.spec", "elasticdl.python", "elasticdl.runtime.tf_quiet")
ROOT_NAMES = frozenset({"__version__", "Mode", "ElasticDLSpec"})
SCANNED = ("elasticdl", "workflows", "steps", "runtime", "proto")


@dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    names: tuple[str, ...]
    where: str


def package_dirs(root: Path) -> dict[str, str]:
    """folder (relative to the root) -> import package, from pyproject.toml's package-dir."""
    config = tomllib.loads((root / "pyproject.toml").read_text())
    mapping = config["tool"]["setuptools"]["package-dir"]
    return {folder: package for package, folder in mapping.items()}


def module_name(path: Path, root: Path, dirs: dict[str, str]) -> str:
    relative = path.relative_to(root)
    top, *rest = relative.parts
    parts = [*dirs[top].split("."), *rest]
    parts[-1] = parts[-1].removesuffix(".py")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(importer: str, is_package: bool, level: int, module: str | None) -> str:
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def edges_of(path: Path, importer: str) -> list[Edge]:
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found: list[Edge] = []
    for node in ast.walk(tree):
        where = f"{path}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [Edge(importer, alias.name, (), where) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module
            if node.level:
                module = _resolve(importer, is_package, node.level, node.module)
            names = tuple(alias.name for alias in node.names)
            if module == PACKAGE:  # the root's own names, or its submodules (elasticdl.cli)
                root = tuple(n for n in names if n in ROOT_NAMES)
                found += [Edge(importer, PACKAGE, root, where)] if root else []
                found += [
                    Edge(importer, f"{PACKAGE}.{n}", (), where) for n in names if n not in root
                ]
            else:
                found.append(Edge(importer, module or "", names, where))
        elif (
            isinstance(node, ast.Call)
            and (getattr(node.func, "attr", None) or getattr(node.func, "id", None))
            == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append(Edge(importer, node.args[0].value, (), where))
    return found


def scan(root: Path) -> list[Edge]:
    dirs = package_dirs(root)
    edges: list[Edge] = []
    for folder in SCANNED:
        for path in sorted((root / folder).rglob("*.py")):
            edges += edges_of(path, module_name(path, root, dirs))
    return edges


def layer_of(module: str) -> str | None:
    """The module's layer; "contract" for the shared types; None: not the project's."""
    if module == PACKAGE:
        return "root"
    if not module.startswith(PACKAGE + "."):
        return None
    if any(module == c or module.startswith(c + ".") for c in CONTRACT):
        return "contract"
    second = module.split(".")[1]
    if second in ("proto", "runtime", "steps", "workflows"):
        return second
    if second == "model_zoo":
        return None
    return "front end"


def violations(edges: list[Edge]) -> list[str]:
    """One line per forbidden edge."""
    problems = []
    for edge in edges:
        source, target = layer_of(edge.importer), layer_of(edge.imported)
        if source in (None, "contract", "root") or target is None:
            continue
        if source == "proto" and target != "proto":
            problems.append(f"{edge.where}: proto imports {edge.imported} (proto imports none)")
            continue
        if target == "root":
            if not edge.names:
                problems.append(
                    f"{edge.where}: {source} imports the package root whole (only "
                    f"{', '.join(sorted(ROOT_NAMES))} may come from there)"
                )
            continue
        if target == "contract":
            continue
        if LAYERS.index(target) > LAYERS.index(source):
            problems.append(f"{edge.where}: {source} imports {target} ({edge.imported})")
    return problems


def test_the_tree_imports_only_downward():
    found = violations(scan(ROOT))
    assert not found, "forbidden imports:\n" + "\n".join(found)


def test_the_preprocessing_package_sits_on_the_runtime():
    """`elasticdl_preprocessing` (ElasticDL's package, for model files) may import the runtime,
    proto and the contract, nothing above them; nothing of `elasticdl` imports it."""
    dirs = package_dirs(ROOT)
    own = []
    for path in sorted((ROOT / "elasticdl_preprocessing").rglob("*.py")):
        own += edges_of(path, module_name(path, ROOT, dirs))
    assert own, "the scan found no imports in elasticdl_preprocessing"
    above = [
        f"{e.where}: {e.imported}"
        for e in own
        if layer_of(e.imported) not in (None, "contract", "runtime", "proto")
    ]
    assert not above, "elasticdl_preprocessing imports above the runtime:\n" + "\n".join(above)
    into = [e.where for e in scan(ROOT) if e.imported.startswith("elasticdl_preprocessing")]
    assert not into, "elasticdl imports elasticdl_preprocessing:\n" + "\n".join(into)


def test_the_scan_sees_the_package_mapping_and_function_local_imports():
    edges = scan(ROOT)
    importers = {e.importer for e in edges}
    assert {"elasticdl.cli", "elasticdl.runtime.master.task_manager", "elasticdl.steps.train"} <= (
        importers
    )
    # steps/train.py imports the runtime's job inside run(): a function-local import.
    assert any(
        e.importer == "elasticdl.steps.train" and e.imported.startswith("elasticdl.runtime.master")
        for e in edges
    )


def _synthetic_tree(tmp_path: Path) -> Path:
    """A minimal tree with the real pyproject.toml mapping and one module per layer."""
    root = tmp_path / "tree"
    root.mkdir()
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    for folder in ("elasticdl", "elasticdl/python", "runtime", "steps", "workflows", "proto"):
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / "__init__.py").write_text("")
    (root / "elasticdl" / "train_command.py").write_text("import argparse\n")
    (root / "elasticdl" / "mode.py").write_text("import enum\n")
    (root / "runtime" / "job.py").write_text(
        "from elasticdl.runtime import tf_quiet\nfrom elasticdl.mode import Mode\n"
        "from elasticdl import __version__\nfrom elasticdl.proto import elasticdl_pb2\n"
    )
    (root / "runtime" / "tf_quiet.py").write_text("import os\n")
    (root / "steps" / "train.py").write_text(
        "from elasticdl.runtime import job\nfrom .. import python\n"
    )
    (root / "workflows" / "definitions.py").write_text(
        "from elasticdl.steps import train\nfrom elasticdl import __version__\n"
    )
    (root / "proto" / "elasticdl_pb2.py").write_text("import google.protobuf\n")
    return root


PLANTED = [
    # (file, import, the rule it breaks)
    (
        "runtime/sql_runner.py",
        "from elasticdl.train_command import options",
        "runtime imports front end",
    ),
    ("runtime/master.py", "def f():\n    import elasticdl.cli\n", "runtime imports front end"),
    ("runtime/x.py", "from elasticdl.workflows import definitions", "runtime imports workflows"),
    ("runtime/y.py", "from ..workflows.local import run_local", "runtime imports workflows"),
    (
        "steps/train2.py",
        "def g():\n    from elasticdl.workflows import local\n",
        "steps imports workflows",
    ),
    ("steps/predict.py", "from elasticdl.predict_command import add", "steps imports front end"),
    (
        "steps/z.py",
        "import importlib\nimportlib.import_module('elasticdl.cli')",
        "steps imports front end",
    ),
    ("workflows/w.py", "from elasticdl import argo_engine", "workflows imports front end"),
    ("runtime/s.py", "from elasticdl.steps import publish", "runtime imports steps"),
    ("proto/p.py", "from elasticdl.runtime import job", "proto imports"),
    ("proto/q.py", "from elasticdl.mode import Mode", "proto imports"),
    ("runtime/r.py", "from elasticdl import train", "runtime imports front end (elasticdl.train)"),
    ("steps/r.py", "import elasticdl", "imports the package root whole"),
]


def test_the_synthetic_tree_is_clean(tmp_path):
    assert violations(scan(_synthetic_tree(tmp_path))) == []


@pytest.mark.parametrize(("file", "code", "rule"), PLANTED, ids=[p[0] for p in PLANTED])
def test_a_planted_forbidden_import_fails(tmp_path, file, code, rule):
    root = _synthetic_tree(tmp_path)
    (root / file).write_text(code + "\n")
    found = violations(scan(root))
    assert len(found) >= 1 and all(file in line for line in found), found
    assert any(rule in line for line in found), found
