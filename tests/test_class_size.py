"""No class in the product's layers grows past 400 lines (the team's rule against god classes)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("elasticdl", "runtime", "steps", "workflows")
MAX_LINES = 400


def class_sizes(root: Path) -> dict[str, int]:
    """`path:Class` -> its length in lines, for every class in the layers under `root`."""
    sizes = {}
    for layer in LAYERS:
        for path in sorted((root / layer).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ClassDef):
                    name = f"{path.relative_to(root)}:{node.name}"
                    sizes[name] = node.end_lineno - node.lineno + 1
    return sizes


def test_no_class_is_over_400_lines() -> None:
    sizes = class_sizes(ROOT)
    assert sizes, "no classes found: the layers moved?"
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_the_check_finds_a_large_class(tmp_path: Path) -> None:
    (tmp_path / "runtime").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "runtime" / "big.py").write_text(f"class Big:\n{body}\n")
    assert class_sizes(tmp_path) == {"runtime/big.py:Big": MAX_LINES + 1}
