"""Example datasets as RecordIO files of serialized tf.train.Example records.

Datasets (every record also has `id`, an int64 list of one: the record's index):

* ``digits`` — REAL handwritten digits: the 1,797 8x8 images of the UCI digits data set
  (values 0-16; `digits.csv.gz`, shipped with the package: see DIGITS.md; no download),
  resized to 20x20 and centred in a 28x28 frame as MNIST is;
  `image` is 784 floats in 0-255, `label` an int64 0-9. The first 1,797 records are the
  originals in a seeded order; later passes shift each image by up to 2 pixels and add pixel
  noise, so no two records are equal. Works unchanged with the MNIST models of the zoo.
* ``cifar10-synthetic`` — 32x32x3 `image` (3,072 floats in 0-255, height x width x channel)
  of a coloured shape on a noisy background; the shape and colour depend on the class, so a
  small CNN learns it. `label` int64 0-9.
* ``regression`` — columns ``x0`` ... ``x7`` (one float each, standard normal) and a float
  `label` = x · `REGRESSION_WEIGHTS` + `REGRESSION_BIAS` + N(0, `REGRESSION_NOISE_STD`²).
* ``classification`` — the same ``x0`` ... ``x7`` and an int64 `label` = 1 where
  x · `CLASSIFICATION_WEIGHTS` + `CLASSIFICATION_BIAS` > 0, else 0.
* ``ctr`` — Criteo-layout click records (`I1`..`I13` int64 counts, `C1`..`C26` hex strings,
  int64 `label`) from a planted teacher; option `vocab_scale` (see `ctr.py`). Pass
  `observer=ctr.TeacherAUC()` to `generate` to learn the best AUC reachable on the data.

Records depend only on the dataset name, the seed and their index: the first n records of a
larger dataset equal a dataset of n records, however the files are sharded.

    python -m elasticdl.runtime.data.generate digits /tmp/digits --num_records 5000 \\
        --records_per_file 1000
"""

from __future__ import annotations

import argparse
import functools
import io
import logging
import math
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import fsspec
import numpy as np

__all__ = [
    "CLASSIFICATION_BIAS",
    "CLASSIFICATION_WEIGHTS",
    "DATASETS",
    "REGRESSION_BIAS",
    "REGRESSION_NOISE_STD",
    "REGRESSION_WEIGHTS",
    "columns",
    "examples",
    "generate",
    "main",
]

logger = logging.getLogger(__name__)

REGRESSION_WEIGHTS = (1.5, -2.0, 0.5, 3.0, -1.0, 0.0, 2.5, -0.5)
REGRESSION_BIAS = 1.0
REGRESSION_NOISE_STD = 0.1
CLASSIFICATION_WEIGHTS = (1.0, -1.0, 2.0, 0.0, 0.5, -1.5, 0.0, 1.0)
CLASSIFICATION_BIAS = 0.25

NUM_TABLE_FEATURES = len(REGRESSION_WEIGHTS)
# A column a generator may add for observers only (the ctr teacher's probability): not written.
TEACHER_COLUMN = "__teacher_probability"
_BLOCK = 1024  # records per random block of the synthetic datasets

# A column block: name -> array of shape [records, values per record] (float32, int64 or bytes).
Columns = dict[str, np.ndarray]


# --------------------------------------------------------------------------- digits


def _resize_matrix(src: int, dst: int) -> np.ndarray:
    """[dst, src] matrix of linear interpolation weights (pixel centres aligned)."""
    pos = np.clip((np.arange(dst) + 0.5) * src / dst - 0.5, 0, src - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, src - 1)
    frac = pos - lo
    m = np.zeros((dst, src))
    m[np.arange(dst), lo] += 1 - frac
    m[np.arange(dst), hi] += frac
    return m


@functools.lru_cache(maxsize=1)
def _digit_images() -> tuple[np.ndarray, np.ndarray]:
    """The digits as float32 [1797, 28, 28] in 0-255, and int64 labels."""
    import gzip
    from importlib import resources

    packed = resources.files("elasticdl.runtime.data").joinpath("digits.csv.gz").read_bytes()
    table = np.loadtxt(io.StringIO(gzip.decompress(packed).decode()), delimiter=",")
    small = table[:, :64].reshape(-1, 8, 8) * (255.0 / 16.0)  # [n, 8, 8]
    m = _resize_matrix(8, 20)
    big = np.einsum("ij,njk,lk->nil", m, small, m)  # bilinear 8x8 -> 20x20
    images = np.zeros((len(big), 28, 28), np.float32)
    images[:, 4:24, 4:24] = np.clip(big, 0, 255)
    return images, table[:, 64].astype(np.int64)


def _digits_blocks(num_records: int, seed: int) -> Iterator[Columns]:
    """One block per pass over the 1,797 digits; passes after the first are jittered."""
    images, labels = _digit_images()
    n = len(images)
    for cycle in range(math.ceil(num_records / n)):
        rng = np.random.default_rng([seed, cycle])
        order = rng.permutation(n)
        block = images[order]
        if cycle > 0:
            block = _jitter(block, rng)  # the whole pass, so records do not depend on num_records
        take = order[: min(n, num_records - cycle * n)]
        block = block[: len(take)]
        first = cycle * n
        yield {
            "id": np.arange(first, first + len(take), dtype=np.int64)[:, None],
            "image": block.reshape(len(take), 28 * 28),
            "label": labels[take][:, None],
        }


def _jitter(images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Shift each image by -2..2 pixels each way and add pixel noise (values stay in 0-255)."""
    count, size = len(images), images.shape[1]
    padded = np.pad(images, ((0, 0), (2, 2), (2, 2)))
    dy = rng.integers(0, 5, count)
    dx = rng.integers(0, 5, count)
    rows = dy[:, None] + np.arange(size)  # [count, 28]
    cols = dx[:, None] + np.arange(size)
    shifted = padded[np.arange(count)[:, None, None], rows[:, :, None], cols[:, None, :]]
    noise = rng.normal(0.0, 8.0, shifted.shape)
    return np.clip(shifted + noise, 0, 255).astype(np.float32)


# --------------------------------------------------------------------------- cifar10-synthetic

# One colour per class (RGB in 0-255); backgrounds are darker than every colour but blue-ish.
_PALETTE = np.array(
    [
        (220, 40, 40),
        (40, 200, 60),
        (50, 90, 240),
        (235, 220, 50),
        (215, 60, 205),
        (60, 215, 225),
        (245, 140, 30),
        (240, 240, 240),
        (140, 70, 210),
        (160, 235, 120),
    ],
    dtype=np.float64,
)


def _shape_masks(shape_id: np.ndarray, cy: np.ndarray, cx: np.ndarray, r: np.ndarray) -> np.ndarray:
    """[n, 32, 32] boolean masks: square, disk, horizontal bar, vertical bar or plus sign."""
    grid = np.arange(32, dtype=np.float64)
    dy = np.abs(grid[None, :, None] - cy[:, None, None])
    dx = np.abs(grid[None, None, :] - cx[:, None, None])
    r = r[:, None, None]
    inside = np.maximum(dx, dy) <= r
    masks = np.stack(
        [
            inside,
            dx**2 + dy**2 <= r**2,
            (dy <= r / 3) & (dx <= r * 1.4),
            (dx <= r / 3) & (dy <= r * 1.4),
            ((dx <= r / 4) | (dy <= r / 4)) & inside,
        ]
    )  # [5, n, 32, 32]
    return masks[shape_id, np.arange(len(shape_id))]


def _cifar10_block(rng: np.random.Generator, count: int) -> Columns:
    labels = rng.integers(0, 10, count)
    background = rng.uniform(0, 90, (count, 1, 1, 3))
    colour = _PALETTE[labels][:, None, None, :] + rng.normal(0, 20, (count, 1, 1, 3))
    cy, cx = rng.uniform(10, 22, count), rng.uniform(10, 22, count)
    radius = rng.uniform(5, 8, count)
    mask = _shape_masks(labels % 5, cy, cx, radius)[..., None]
    images = np.where(mask, colour, background) + rng.normal(0, 15, (count, 32, 32, 3))
    return {
        "image": np.clip(images, 0, 255).astype(np.float32).reshape(count, 32 * 32 * 3),
        "label": labels.astype(np.int64)[:, None],
    }


# --------------------------------------------------------------------------- tables


def _table_features(rng: np.random.Generator, count: int) -> tuple[np.ndarray, Columns]:
    x = rng.standard_normal((count, NUM_TABLE_FEATURES)).astype(np.float32)
    return x, {f"x{i}": x[:, i : i + 1] for i in range(NUM_TABLE_FEATURES)}


def _regression_block(rng: np.random.Generator, count: int) -> Columns:
    x, cols = _table_features(rng, count)
    noise = rng.normal(0.0, REGRESSION_NOISE_STD, count)
    y = x.astype(np.float64) @ np.asarray(REGRESSION_WEIGHTS) + REGRESSION_BIAS + noise
    cols["label"] = y.astype(np.float32)[:, None]
    return cols


def _classification_block(rng: np.random.Generator, count: int) -> Columns:
    x, cols = _table_features(rng, count)
    score = x.astype(np.float64) @ np.asarray(CLASSIFICATION_WEIGHTS) + CLASSIFICATION_BIAS
    cols["label"] = (score > 0).astype(np.int64)[:, None]
    return cols


def _ctr_block(rng: np.random.Generator, count: int, **options: Any) -> Columns:
    from elasticdl.runtime.data import ctr

    cols, probability = ctr.block(rng, count, **options)
    cols[TEACHER_COLUMN] = probability[:, None]
    return cols


def _synthetic(
    make_block: Callable[..., Columns],
) -> Callable[..., Iterator[Columns]]:
    """Blocks of `_BLOCK` records, block b drawn from a generator seeded with (seed, b)."""

    def blocks(num_records: int, seed: int, **options: Any) -> Iterator[Columns]:
        for b in range(math.ceil(num_records / _BLOCK)):
            first = b * _BLOCK
            count = min(_BLOCK, num_records - first)
            # Always draw a whole block, so a record does not depend on num_records.
            cols = make_block(np.random.default_rng([seed, b]), _BLOCK, **options)
            cols = {name: values[:count] for name, values in cols.items()}
            cols["id"] = np.arange(first, first + count, dtype=np.int64)[:, None]
            yield cols

    return blocks


_GENERATORS: dict[str, Callable[..., Iterator[Columns]]] = {
    "ctr": _synthetic(_ctr_block),
    "digits": _digits_blocks,
    "cifar10-synthetic": _synthetic(_cifar10_block),
    "regression": _synthetic(_regression_block),
    "classification": _synthetic(_classification_block),
}
DATASETS: tuple[str, ...] = tuple(sorted(_GENERATORS))


# --------------------------------------------------------------------------- records


_OPTIONS = {"ctr": ("vocab_scale",)}


def _check(name: str, num_records: int, options: dict[str, Any] | None = None) -> None:
    if name not in _GENERATORS:
        raise ValueError(f"unknown dataset {name!r}; valid names: {', '.join(DATASETS)}")
    unknown = sorted(set(options or {}) - set(_OPTIONS.get(name, ())))
    if unknown:
        valid = ", ".join(_OPTIONS.get(name, ())) or "none"
        raise ValueError(f"dataset {name!r} takes no option {unknown[0]!r}; its options: {valid}")
    if isinstance(num_records, bool) or not isinstance(num_records, int | np.integer):
        raise TypeError(f"num_records must be an integer, got {num_records!r}")
    if num_records <= 0:
        raise ValueError(f"num_records must be a positive number of records, got {num_records}")


def columns(name: str, num_records: int, seed: int = 0, **options: Any) -> Iterator[Columns]:
    """The dataset as blocks of columns: name -> array [records in block, values per record].

    `options` are the dataset's own (`vocab_scale` for ctr)."""
    _check(name, num_records, options)
    return _GENERATORS[name](int(num_records), int(seed), **options)


def _serialize(block: Columns) -> Iterator[bytes]:
    """One serialized tf.train.Example per row of a column block."""
    from tensorflow.core.example import example_pb2, feature_pb2

    encoders: list[tuple[str, Callable[[list[Any]], Any], list[Any]]] = []
    for col, values in sorted(block.items()):
        if col == TEACHER_COLUMN:
            continue
        if values.dtype.kind == "f":
            encoders.append((col, _float_feature(feature_pb2), values.tolist()))
        elif values.dtype.kind in "iu":
            encoders.append((col, _int64_feature(feature_pb2), values.tolist()))
        elif values.dtype.kind == "S":
            encoders.append((col, _bytes_feature(feature_pb2), values.tolist()))
        else:
            raise TypeError(f"column {col!r} has unsupported dtype {values.dtype}")
    rows = len(block["id"])
    for i in range(rows):
        example = example_pb2.Example()
        feature_map = example.features.feature
        for col, encode, values in encoders:
            feature_map[col].CopyFrom(encode(values[i]))
        yield example.SerializeToString(deterministic=True)


def _float_feature(pb: Any) -> Callable[[list[Any]], Any]:
    return lambda v: pb.Feature(float_list=pb.FloatList(value=v))


def _int64_feature(pb: Any) -> Callable[[list[Any]], Any]:
    return lambda v: pb.Feature(int64_list=pb.Int64List(value=v))


def _bytes_feature(pb: Any) -> Callable[[list[Any]], Any]:
    return lambda v: pb.Feature(bytes_list=pb.BytesList(value=v))


def examples(
    name: str, num_records: int, seed: int = 0, observer: Any = None, **options: Any
) -> Iterator[bytes]:
    """Serialized tf.train.Example records of dataset `name`, in order.

    `observer.update(teacher_probability, labels)` sees each block of a dataset with a teacher
    (ctr) as it is generated."""
    for block in columns(name, num_records, seed, **options):
        if observer is not None and TEACHER_COLUMN in block:
            observer.update(block[TEACHER_COLUMN][:, 0], block["label"][:, 0])
        yield from _serialize(block)


# --------------------------------------------------------------------------- files


def _shard_name(name: str, index: int, count: int) -> str:
    return f"{name}-{index:05d}-of-{count:05d}.recordio"


def generate(
    name: str,
    output_dir: str | os.PathLike[str],
    num_records: int,
    records_per_file: int | None = None,
    seed: int = 0,
    compressor: Any = None,
    storage_options: dict[str, Any] | None = None,
    observer: Any = None,
    **options: Any,
) -> list[str]:
    """Write dataset `name` as RecordIO shards under `output_dir` (an fsspec path or URL).

    Files are named ``<name>-00000-of-0000N.recordio``, `records_per_file` records each (all
    in one file when None). `compressor` is a `recordio.Compressor` or its name ("snappy",
    the default, "gzip", "none"). Each shard is written under a temporary name and renamed
    only when all are complete; on failure nothing of this call is left behind. Returns the
    shard paths, in order, spelled like `output_dir`. `observer` and `options`: see `examples`.
    """
    from elasticdl.runtime.data.recordio import Compressor, RecordIOWriter

    _check(name, num_records, options)
    if records_per_file is None:
        records_per_file = num_records
    if isinstance(records_per_file, bool) or int(records_per_file) != records_per_file:
        raise TypeError(f"records_per_file must be an integer, got {records_per_file!r}")
    if records_per_file <= 0:
        raise ValueError(f"records_per_file must be positive, got {records_per_file}")
    if compressor is None:
        compressor = Compressor.SNAPPY
    elif isinstance(compressor, str):
        try:
            compressor = Compressor[compressor.upper()]
        except KeyError:
            valid = ", ".join(c.name.lower() for c in Compressor)
            raise ValueError(f"unknown compressor {compressor!r}; valid: {valid}") from None

    url = os.fspath(output_dir)
    if not url:
        raise ValueError("output_dir is empty; give a directory path or URL for the files")
    url = url.rstrip("/") or "/"
    fs, root = fsspec.core.url_to_fs(url, **(storage_options or {}))
    fs.makedirs(root, exist_ok=True)
    num_files = math.ceil(num_records / records_per_file)
    names = [_shard_name(name, i, num_files) for i in range(num_files)]
    tag = uuid.uuid4().hex[:8]
    temps = [f"{root.rstrip('/')}/.{n}.tmp-{tag}" for n in names]
    finals = [f"{root.rstrip('/')}/{n}" for n in names]

    if observer is not None:
        options["observer"] = observer
    records = examples(name, num_records, seed, **options)
    done: list[str] = []
    try:
        for index, temp in enumerate(temps):
            count = min(records_per_file, num_records - index * records_per_file)
            with RecordIOWriter(temp, fs=fs, compressor=compressor) as writer:
                for _ in range(count):
                    writer.write(next(records))
        for temp, final in zip(temps, finals, strict=True):
            fs.mv(temp, final)
            done.append(final)
    except BaseException:
        for path in [*temps, *done]:
            try:
                if fs.exists(path):
                    fs.rm(path)
            except Exception:  # best effort; the original error matters more
                logger.warning("could not remove %s", path, exc_info=True)
        raise
    prefix = "" if url == "/" else url
    return [f"{prefix}/{n}" for n in names]


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: write a dataset and print the files written, one a line."""
    parser = argparse.ArgumentParser(
        prog="python -m elasticdl.runtime.data.generate",
        description="Write an example dataset as RecordIO files of tf.train.Example records.",
    )
    parser.add_argument("name", choices=DATASETS, help="which dataset")
    parser.add_argument("output_dir", help="directory (fsspec path or URL) for the files")
    parser.add_argument("--num_records", type=int, required=True, help="how many records")
    parser.add_argument("--records_per_file", type=int, default=None, help="default: one file")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--compressor", default="snappy", choices=("snappy", "gzip", "none"), help="chunk codec"
    )
    args = parser.parse_args(argv)
    try:
        paths = generate(
            args.name,
            args.output_dir,
            args.num_records,
            records_per_file=args.records_per_file,
            seed=args.seed,
            compressor=args.compressor,
        )
    except (ValueError, TypeError) as e:
        parser.error(str(e))
    print("\n".join(paths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
