"""Example dataset generators: content, determinism, sharding, atomic output, errors."""

from __future__ import annotations

import os

import fsspec
import numpy as np
import pytest
from tensorflow.core.example import example_pb2

from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.data.recordio import Compressor, read_records


def parse(record: bytes) -> dict[str, list]:
    features = example_pb2.Example.FromString(record).features.feature
    out = {}
    for name, feature in features.items():
        kind = feature.WhichOneof("kind")
        out[name] = list(getattr(feature, kind).value)
    return out


def table(records: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    rows = [parse(r) for r in records]
    x = np.array([[row[f"x{i}"][0] for i in range(8)] for row in rows], np.float64)
    y = np.array([row["label"][0] for row in rows], np.float64)
    return x, y


@pytest.fixture(scope="module")
def digits_1900() -> list[bytes]:
    return list(gen.examples("digits", 1900))


def test_digits_are_the_scikit_learn_digits_in_mnist_layout(digits_1900):
    from sklearn.datasets import load_digits

    rows = [parse(r) for r in digits_1900]
    assert [row["id"] for row in rows] == [[i] for i in range(1900)]
    assert set(rows[0]) == {"id", "image", "label"}
    images = np.array([row["image"] for row in rows], np.float32)
    labels = np.array([row["label"][0] for row in rows])
    assert images.shape == (1900, 784)
    assert images.min() >= 0.0 and images.max() <= 255.0 and images.max() > 200.0
    assert set(labels) == set(range(10))
    # The first pass is every scikit-learn digit once: same label counts, same ink per image.
    digits = load_digits()
    np.testing.assert_array_equal(np.bincount(labels[:1797]), np.bincount(digits.target))
    ink = np.sort(images[:1797].sum(axis=1))
    reference = np.sort(digits.images.reshape(1797, -1).sum(axis=1))
    assert np.corrcoef(ink, reference)[0, 1] > 0.99
    # MNIST-like: a 4-pixel empty frame around the digit in the first pass.
    frames = images[:1797].reshape(-1, 28, 28)
    assert frames[:, :4].max() == 0 and frames[:, :, 24:].max() == 0
    # Later passes are jittered copies: no record repeats an earlier one.
    assert len({img.tobytes() for img in images}) == 1900


def test_digit_classes_are_separable(digits_1900):
    # A nearest-class-mean classifier does well on real digits (and not on noise).
    rows = [parse(r) for r in digits_1900[:1500]]
    images = np.array([row["image"] for row in rows]) / 255.0
    labels = np.array([row["label"][0] for row in rows])
    train, test = slice(0, 1000), slice(1000, 1500)
    means = np.stack([images[train][labels[train] == c].mean(axis=0) for c in range(10)])
    distances = ((images[test, None, :] - means[None]) ** 2).sum(axis=-1)
    assert (distances.argmin(axis=1) == labels[test]).mean() > 0.8


def test_cifar10_synthetic_is_class_dependent():
    rows = [parse(r) for r in gen.examples("cifar10-synthetic", 600)]
    images = np.array([row["image"] for row in rows], np.float32).reshape(-1, 32, 32, 3)
    labels = np.array([row["label"][0] for row in rows])
    assert images.min() >= 0 and images.max() <= 255
    assert set(labels) == set(range(10))
    # The brightest colours of an image tell its class: nearest class mean on a few statistics.
    stats = np.percentile(images.reshape(600, -1, 3), [90, 98], axis=1).transpose(1, 0, 2)
    stats = stats.reshape(600, -1)
    means = np.stack([stats[:400][labels[:400] == c].mean(axis=0) for c in range(10)])
    predicted = ((stats[400:, None] - means[None]) ** 2).sum(axis=-1).argmin(axis=1)
    assert (predicted == labels[400:]).mean() > 0.75


def test_regression_follows_the_published_weights():
    x, y = table(list(gen.examples("regression", 2000)))
    assert x.shape == (2000, 8)
    expected = x @ np.asarray(gen.REGRESSION_WEIGHTS) + gen.REGRESSION_BIAS
    residual = y - expected
    assert abs(residual.mean()) < 0.02
    assert residual.std() == pytest.approx(gen.REGRESSION_NOISE_STD, rel=0.1)
    design = np.hstack([x, np.ones((len(x), 1))])
    solution, *_ = np.linalg.lstsq(design, y, rcond=None)
    np.testing.assert_allclose(solution[:8], gen.REGRESSION_WEIGHTS, atol=0.02)
    assert solution[8] == pytest.approx(gen.REGRESSION_BIAS, abs=0.02)


def test_classification_follows_the_published_rule():
    records = list(gen.examples("classification", 500))
    x, y = table(records)
    rule = x @ np.asarray(gen.CLASSIFICATION_WEIGHTS) + gen.CLASSIFICATION_BIAS > 0
    np.testing.assert_array_equal(y, rule.astype(float))
    assert 0.3 < y.mean() < 0.7
    kinds = example_pb2.Example.FromString(records[0]).features.feature["label"]
    assert kinds.WhichOneof("kind") == "int64_list"


@pytest.mark.parametrize("name", gen.DATASETS)
def test_records_depend_only_on_seed_and_index(name):
    few = list(gen.examples(name, 30, seed=7))
    assert few == list(gen.examples(name, 30, seed=7))
    assert few != list(gen.examples(name, 30, seed=8))
    # Prefix property: a bigger data set starts with the same records.
    more = 1800 if name == "digits" else 1100
    assert list(gen.examples(name, more, seed=7))[:30] == few


def test_generate_shards_and_round_trips(tmp_path):
    paths = gen.generate("regression", str(tmp_path / "out"), 25, records_per_file=10, seed=3)
    assert paths == [
        str(tmp_path / "out" / f"regression-0000{i}-of-00003.recordio") for i in range(3)
    ]
    assert sorted(os.listdir(tmp_path / "out")) == [os.path.basename(p) for p in paths]
    shards = [list(read_records(p)) for p in paths]
    assert [len(s) for s in shards] == [10, 10, 5]
    assert [r for s in shards for r in s] == list(gen.examples("regression", 25, seed=3))
    # Deterministic bytes on disk, too.
    again = gen.generate("regression", str(tmp_path / "again"), 25, records_per_file=10, seed=3)
    for a, b in zip(paths, again, strict=True):
        assert open(a, "rb").read() == open(b, "rb").read()


def test_generate_defaults_to_one_file_and_takes_compressors(tmp_path):
    [single] = gen.generate("classification", str(tmp_path), 12)
    assert single.endswith("classification-00000-of-00001.recordio")
    expected = list(read_records(single))
    assert len(expected) == 12
    for compressor in (Compressor.GZIP, "none", "SNAPPY"):
        [path] = gen.generate(
            "classification", str(tmp_path / str(compressor)), 12, compressor=compressor
        )
        assert list(read_records(path)) == expected


def test_generate_writes_to_fsspec_urls():
    url = "memory://generate-test/digits"
    try:
        paths = gen.generate("digits", url, 6, records_per_file=4)
        assert paths == [
            f"{url}/digits-00000-of-00002.recordio",
            f"{url}/digits-00001-of-00002.recordio",
        ]
        assert sum(len(list(read_records(p))) for p in paths) == 6
    finally:
        fsspec.filesystem("memory").rm("/generate-test", recursive=True)


def test_failed_generation_leaves_nothing(tmp_path, monkeypatch):
    real = gen.examples

    def failing(name, num_records, seed=0):
        for i, record in enumerate(real(name, num_records, seed)):
            if i == 15:
                raise RuntimeError("disk on fire")
            yield record

    monkeypatch.setattr(gen, "examples", failing)
    with pytest.raises(RuntimeError, match="disk on fire"):
        gen.generate("regression", str(tmp_path), 30, records_per_file=10)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"name": "mnist"},
            ValueError,
            "unknown dataset 'mnist'; valid names: cifar10-synthetic, classification, ctr, digits, "
            "regression",
        ),
        ({"num_records": 0}, ValueError, "num_records must be a positive"),
        ({"num_records": -5}, ValueError, "num_records must be a positive"),
        ({"num_records": 2.5}, TypeError, "num_records must be an integer"),
        ({"records_per_file": 0}, ValueError, "records_per_file must be positive"),
        (
            {"compressor": "zstd"},
            ValueError,
            "unknown compressor 'zstd'; valid: none, snappy, gzip",
        ),
    ],
)
def test_generate_rejects_bad_arguments(tmp_path, kwargs, error, message):
    args = {"name": "regression", "num_records": 10, **kwargs}
    out = tmp_path / "never"
    with pytest.raises(error, match=message):
        gen.generate(output_dir=str(out), **args)
    assert not out.exists() or os.listdir(out) == []


def test_command_line(tmp_path, capsys):
    assert (
        gen.main(["regression", str(tmp_path), "--num_records", "7", "--records_per_file", "5"])
        == 0
    )
    printed = capsys.readouterr().out.split()
    assert [os.path.basename(p) for p in printed] == [
        "regression-00000-of-00002.recordio",
        "regression-00001-of-00002.recordio",
    ]
    with pytest.raises(SystemExit) as exit_info:
        gen.main(["regression", str(tmp_path), "--num_records", "0"])
    assert exit_info.value.code == 2
    assert "num_records must be a positive" in capsys.readouterr().err


def test_generate_rejects_an_empty_output_dir():
    with pytest.raises(ValueError, match="output_dir is empty"):
        gen.generate("regression", "", 5)
