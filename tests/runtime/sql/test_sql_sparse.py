"""SQL on a sparse model: a high-cardinality text column of `classifier.DNN` goes through the
parameter servers' embeddings, TRAIN learns from it, and PREDICT writes one row per input (the
rule itself, `goes_to_ps`: tests/model_zoo/test_models.py).

The table (SQLite): `item` (text, 300 distinct values, each on 8 training rows), `x` (a number
independent of the label) and `label`, which is the item's hidden class on 90% of its rows.
Without `item` no model can beat the majority class on average (x says nothing about the
label): that rate is the baseline the trained model must beat by a wide margin.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

import elasticdl
from elasticdl.runtime.embedding.tables import split_trained
from elasticdl.runtime.master.export import load_params
from elasticdl.runtime.trained_model import read_trained_model

pytestmark = pytest.mark.slow

ITEMS, TRAIN_ROWS, HOLDOUT_ROWS = 300, 8, 2
JOB = {"num_workers": 1}


def _rows(rng: np.random.Generator, hidden: np.ndarray, per_item: int) -> list[dict]:
    items = np.repeat(np.arange(ITEMS), per_item)
    flip = rng.random(items.size) < 0.1
    labels = np.where(flip, 1 - hidden[items], hidden[items])
    order = rng.permutation(items.size)
    return [
        {"item": f"item-{items[i]:04d}", "x": float(rng.normal()), "label": int(labels[i])}
        for i in order
    ]


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('sparse') / 'visits.db'}"
    rng = np.random.default_rng(7)
    hidden = rng.integers(0, 2, ITEMS)
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE visits (item TEXT, x REAL, label INTEGER)")
            conn.exec_driver_sql(
                "CREATE TABLE holdout (id INTEGER PRIMARY KEY, item TEXT, x REAL, label INTEGER)"
            )
            conn.execute(
                sa.text("INSERT INTO visits VALUES (:item, :x, :label)"),
                _rows(rng, hidden, TRAIN_ROWS),
            )
            holdout = [{"id": i, **r} for i, r in enumerate(_rows(rng, hidden, HOLDOUT_ROWS))]
            conn.execute(sa.text("INSERT INTO holdout VALUES (:id, :item, :x, :label)"), holdout)
    finally:
        engine.dispose()
    return url


def query(url: str, sql: str) -> list:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.exec_driver_sql(sql).all()
    finally:
        engine.dispose()


def test_a_high_cardinality_text_column_trains_on_the_ps_and_predicts_one_row_per_input(
    db, tmp_path
):
    root = tmp_path / "models"
    trained = elasticdl.sql(
        "SELECT item, x, label FROM visits TRAIN classifier.DNN WITH hidden_units=[16], "
        "learning_rate=0.05, ps_embedding_min_distinct=250, train.epochs=3, "
        "train.batch_size=64 INTO by_item",
        db=db,
        model_root=str(root),
        job_options=JOB,
    )
    assert trained.succeeded, trained.error
    model = Path(trained.run)  # the run `by_item` (root/by_item/LATEST) names
    # `item` went to one PS table, a row per value (no hashing into shared buckets).
    tables = read_trained_model(str(model)).trained.embedding_tables
    assert [(t.name, t.rows) for t in tables] == [("e000/ps_embedding", ITEMS)]
    _, rows = split_trained(load_params((model / "params.npz").read_bytes()))
    assert rows["e000/ps_embedding"][0].size == ITEMS
    assert (model / "saved_model" / "saved_model.pb").is_file()  # exported with the rows

    predicted = elasticdl.sql(
        "SELECT id, item, x FROM holdout PREDICT scored.clicked USING by_item",
        db=db,
        model_root=str(root),
        job_options=JOB,
    )
    assert predicted.succeeded, predicted.error
    inputs = ITEMS * HOLDOUT_ROWS
    scored = query(db, "SELECT id, clicked FROM scored")
    assert predicted.rows == inputs and len(scored) == inputs
    assert sorted(r[0] for r in scored) == list(range(inputs)), "one row per input"
    assert all(r[1] in (0, 1) for r in scored)

    pairs = query(db, "SELECT s.clicked, h.label FROM scored s JOIN holdout h ON s.id = h.id")
    accuracy = float(np.mean([p == t for p, t in pairs]))
    labels = [t for _, t in pairs]
    baseline = max(np.mean(labels), 1 - np.mean(labels))  # the best without `item`
    print(f"held-out accuracy {accuracy:.3f}, best without the column {baseline:.3f}")
    assert accuracy >= baseline + 0.2
