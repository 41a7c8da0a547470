"""The ctr data set: Criteo layout, Zipf values within the cardinalities, the teacher's AUC."""

from __future__ import annotations

import numpy as np
import pytest
from tensorflow.core.example import example_pb2

from elasticdl.runtime.data import ctr
from elasticdl.runtime.data import generate as gen


def parse(record: bytes) -> dict[str, list]:
    features = example_pb2.Example.FromString(record).features.feature
    return {n: list(getattr(f, f.WhichOneof("kind")).value) for n, f in features.items()}


@pytest.fixture(scope="module")
def rows() -> list[dict[str, list]]:
    return [parse(r) for r in gen.examples("ctr", 3000, seed=5, vocab_scale=0.001)]


def test_records_have_the_criteo_layout(rows):
    expected = {*ctr.INT_COLUMNS, *ctr.CAT_COLUMNS, "label", "id"}
    assert all(set(row) == expected for row in rows)
    assert [row["id"] for row in rows] == [[i] for i in range(3000)]
    counts = np.array([[row[c][0] for c in ctr.INT_COLUMNS] for row in rows])
    assert counts.dtype == np.int64 and counts.min() >= 0 and counts.max() > 100
    hexes = [row["C1"][0] for row in rows]
    assert all(len(h) == 8 and int(h, 16) >= 0 for h in hexes)
    labels = np.array([row["label"][0] for row in rows])
    assert set(labels) == {0, 1} and 0.1 < labels.mean() < 0.7


def test_categorical_values_are_zipf_within_the_cardinalities(rows):
    cards = ctr.cardinalities(0.001)
    for c, name in enumerate(ctr.CAT_COLUMNS):
        values = [row[name][0] for row in rows]
        assert len(set(values)) <= cards[c]
    # C3 has 10,131 values at this scale; Zipf: the top value is frequent, most are rare.
    _, freq = np.unique([row["C3"][0] for row in rows], return_counts=True)
    assert freq.max() > 100 and np.median(freq) <= 2
    # A value's string is fixed per (column, rank), whatever the seed.
    assert ctr.hex_values(2, np.array([0]))[0] == max(
        set(r["C3"][0] for r in rows), key=[r["C3"][0] for r in rows].count
    )


def test_records_depend_only_on_seed_and_index():
    a = list(gen.examples("ctr", 1500, seed=1))
    assert a[:700] == list(gen.examples("ctr", 700, seed=1))
    assert a[0] != list(gen.examples("ctr", 1, seed=2))[0]


def test_teacher_auc_is_the_auc_of_the_teacher_probabilities():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    observer = ctr.TeacherAUC()
    cols, probability = ctr.block(rng, 5000)
    observer.update(probability[:2500], cols["label"][:2500])
    observer.update(probability[2500:], cols["label"][2500:])
    exact = roc_auc_score(cols["label"][:, 0], probability)
    assert observer.value() == pytest.approx(exact, abs=2e-4)
    assert 0.75 < exact < 0.95  # learnable, not trivial


def test_generate_reports_the_teacher_auc_and_rejects_unknown_options(tmp_path, capsys):
    from elasticdl.cli import main

    main(["data", "gen", "ctr", "--output", str(tmp_path / "d"), "--num_records", "1200",
          "--vocab_scale", "0.0001"])  # fmt: skip
    out = capsys.readouterr().out
    assert "wrote 1200 ctr record(s) in 1 file(s)" in out
    assert "teacher AUC 0." in out
    with pytest.raises(ValueError, match="takes no option 'vocab_scale'"):
        gen.generate("regression", tmp_path / "r", 10, vocab_scale=0.1)
    with pytest.raises(ValueError, match="vocab_scale must be positive"):
        ctr.cardinalities(0)
