"""The wheel must contain every package folder: pyproject lists them by hand (package-dir)."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    roots = {name: ROOT / folder for name, folder in config["package-dir"].items()}
    found = set()
    for name, folder in roots.items():
        if name == "elasticdl.model_zoo":
            found.add(name)  # its subfolders ship as package data
            continue
        for init in folder.rglob("__init__.py"):
            relative = init.parent.relative_to(folder).parts
            if "__pycache__" in relative:
                continue
            found.add(".".join((name, *relative)))
    assert found == listed, "add/remove these in [tool.setuptools] packages of pyproject.toml"


def test_proto_folder_is_a_regular_package_and_generated_code_is_present():
    assert (ROOT / "proto" / "__init__.py").exists()
    assert (ROOT / "proto" / "elasticdl_pb2.py").exists()
