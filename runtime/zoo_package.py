"""A model zoo importable under its directory's own name, as ElasticDL's images made it.

ElasticDL copied a zoo into its image with the zoo's parent on the Python path too, so model
files import their neighbours both ways: `--model_def=cifar10.cifar10_functional_api.custom_model`
(the zoo root on the path) and, inside that file, `from model_zoo.cifar10.data_parser import
parse_data` (the zoo's directory, `model_zoo`, as a package). Putting the parent directory on the
path would expose everything beside the zoo (a checkout of ElasticDL has an `elasticdl/` folder
there, which must never shadow this package), so `register(zoo_root)` instead makes the one
package `<directory name>` whose `__path__` is the zoo root: `model_zoo.x.y` then imports
`<zoo root>/x/y.py` by the ordinary machinery. The zoo's own `__init__.py`, when it has one, runs
as that package's body.

Nothing is registered when the name could mislead: not an identifier, a keyword, a standard
library module, a module installed elsewhere (`tensorflow`, `elasticdl`), or a name the zoo
itself uses for a top-level module (`<zoo root>/<name>.py` or `<zoo root>/<name>/`). A package
registered for another zoo of the same name is replaced, with its submodules, so a process that
loads several zoos in turn (tests, the master's probe) always imports from the current one.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import keyword
import sys
from pathlib import Path
from types import ModuleType

_MARK = "__elasticdl_zoo_root__"


def package_name(zoo_root: Path) -> str | None:
    """The name the zoo is importable under, or None when none may be registered."""
    name = zoo_root.name
    if not name.isidentifier() or keyword.iskeyword(name) or name in sys.stdlib_module_names:
        return None
    if (zoo_root / f"{name}.py").exists() or (zoo_root / name).is_dir():
        return None
    existing = sys.modules.get(name)
    if existing is not None:
        return name if getattr(existing, _MARK, None) is not None else None
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        found = None
    return name if found is None else None


def register(zoo_root: Path) -> str | None:
    """Make `zoo_root` importable as the package named after its directory; the name, or None
    (see the module docstring for when). Callers hold the zoo import lock."""
    root = zoo_root.resolve()
    name = package_name(root)
    if name is None:
        return None
    existing = sys.modules.get(name)
    if existing is not None and getattr(existing, _MARK, None) == str(root):
        return name
    for loaded in [n for n in sys.modules if n == name or n.startswith(name + ".")]:
        del sys.modules[loaded]
    sys.modules[name] = _package(name, root)
    return name


def _package(name: str, root: Path) -> ModuleType:
    """The package module: the zoo's `__init__.py` as its body, or an empty one."""
    init = root / "__init__.py"
    if init.is_file():
        spec = importlib.util.spec_from_file_location(
            name, init, submodule_search_locations=[str(root)]
        )
    else:
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(root)]
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    setattr(module, _MARK, str(root))
    sys.modules[name] = module
    try:
        if spec.loader is not None:
            spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
