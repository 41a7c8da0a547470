"""Initial embedding rows, a pure function of (table name, seed, id): no RNG state anywhere.

Two workers touching a new id at once, or a relaunched parameter server recreating a row it
never checkpointed, get exactly the same row. Values come from a counter-based generator: each
(id, column, round) is hashed with `mix64` under the table's salt and the top 24 bits become a
uniform float in [0, 1). Vectorised over ids and columns.

Specs (Keras names and defaults, per row; Keras's fan-based initializers such as glorot_* need
the table's size, which an id -> row map does not have, so they are refused):

    "uniform" / "random_uniform"   U(minval=-0.05, maxval=0.05)        (keras.layers.Embedding's)
    "normal" / "random_normal"     N(mean=0, stddev=0.05)               (Box-Muller)
    "truncated_normal"             N(0, 0.05) redrawn beyond 2 stddev   (Keras's rule)
    "zeros", "ones"                constants
    JSON of `keras.initializers.serialize(...)` for RandomUniform, RandomNormal,
    TruncatedNormal, Zeros, Ones, Constant: their minval/maxval/mean/stddev/value are honoured
    (their `seed` is not: rows depend on the table's seed).
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass

import numpy as np

from elasticdl.runtime.ps.partition import mix64

_ALIASES = {
    "uniform": "random_uniform",
    "randomuniform": "random_uniform",
    "random_uniform": "random_uniform",
    "normal": "random_normal",
    "randomnormal": "random_normal",
    "random_normal": "random_normal",
    "truncatednormal": "truncated_normal",
    "truncated_normal": "truncated_normal",
    "zeros": "constant",
    "zero": "constant",
    "ones": "constant",
    "one": "constant",
    "constant": "constant",
}
_DEFAULTS = {
    "random_uniform": (-0.05, 0.05),
    "random_normal": (0.0, 0.05),
    "truncated_normal": (0.0, 0.05),
    "constant": (0.0, 0.0),
}
_COLUMN = np.uint64(0xD1B54A32D192ED03)
_ROUND_STRIDE = 1 << 20


@dataclass(frozen=True)
class RowInitializer:
    """`kind` with parameters `a`, `b`: (minval, maxval), (mean, stddev) or (value, unused)."""

    kind: str
    a: float
    b: float

    def rows(self, ids: np.ndarray, dim: int, salt: int) -> np.ndarray:
        """Initial rows (float32, (len(ids), dim)) of `ids` in a table with `salt`."""
        ids = np.asarray(ids, dtype=np.int64)
        if self.kind == "constant":
            return np.full((ids.size, dim), self.a, dtype=np.float32)
        base = mix64(ids, salt)
        if self.kind == "random_uniform":
            u = _uniform(base, dim, 0)
            return (u * np.float32(self.b - self.a) + np.float32(self.a)).astype(np.float32)
        z = _standard_normal(base, dim, 0)
        if self.kind == "truncated_normal":
            bad = np.abs(z) > 2.0
            round_ = 1
            while bad.any():
                rows, cols = np.nonzero(bad)
                redraw = _standard_normal(base[rows], dim, round_)[np.arange(rows.size), cols]
                z[rows, cols] = redraw
                bad[rows, cols] = np.abs(redraw) > 2.0
                round_ += 1
        return (z * np.float32(self.b) + np.float32(self.a)).astype(np.float32)


def parse_initializer(spec: str) -> RowInitializer:
    """The initializer of a spec (see the module docstring); ValueError (one line) if unknown."""
    text = (spec or "uniform").strip()
    config: dict = {}
    name = text
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
            name = str(parsed.get("class_name", ""))
            config = dict(parsed.get("config") or {})
        except (ValueError, AttributeError, TypeError) as error:
            raise ValueError(f"embedding initializer {spec!r} is not valid JSON: {error}") from None
    key = name.lower()
    kind = _ALIASES.get(key)
    if kind is None:
        raise ValueError(
            f"embedding initializer {spec!r} is not supported for tables on parameter servers; "
            "use uniform, random_normal, truncated_normal, zeros, ones or constant"
        )
    a, b = _DEFAULTS[kind]
    if kind == "random_uniform":
        a, b = float(config.get("minval", a)), float(config.get("maxval", b))
    elif kind in ("random_normal", "truncated_normal"):
        a, b = float(config.get("mean", a)), float(config.get("stddev", b))
    elif key in ("ones", "one"):
        a = 1.0
    elif kind == "constant":
        a = float(config.get("value", 0.0))
    return RowInitializer(kind, a, b)


def table_salt(name: str, seed: int) -> int:
    """The generator salt of table `name` with `seed` (stable across processes)."""
    mixed = (zlib.crc32(name.encode("utf-8")) << 32) ^ (int(seed) & 0xFFFF_FFFF)
    return int(mix64(np.array([mixed], dtype=np.uint64))[0])


def _uniform(base: np.ndarray, dim: int, round_: int) -> np.ndarray:
    """U[0, 1) float32 of shape (len(base), dim), from 24 hashed bits per value."""
    columns = (np.arange(dim, dtype=np.uint64) + np.uint64(round_ * _ROUND_STRIDE + 1)) * _COLUMN
    with np.errstate(over="ignore"):
        bits = mix64(base[:, None] ^ columns[None, :]) >> np.uint64(40)
    return bits.astype(np.float32) * np.float32(1.0 / (1 << 24))


def _standard_normal(base: np.ndarray, dim: int, round_: int) -> np.ndarray:
    """N(0, 1) float32 of shape (len(base), dim) by Box-Muller (two uniforms per value)."""
    u1 = _uniform(base, dim, 2 * round_ + 1).astype(np.float64)
    u2 = _uniform(base, dim, 2 * round_ + 2).astype(np.float64)
    radius = np.sqrt(-2.0 * np.log1p(-u1))  # 1 - u1 is in (0, 1]
    return (radius * np.cos(2.0 * np.pi * u2)).astype(np.float32)
