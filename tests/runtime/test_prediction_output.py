"""Prediction parts: naming, columns, the RecordIO and CSV encodings, atomic part writes."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from elasticdl.runtime import prediction_output as out


def record(**features) -> bytes:
    example = tf.train.Example()
    for name, values in features.items():
        feature = example.features.feature[name]
        if isinstance(values[0], bytes):
            feature.bytes_list.value.extend(values)
        elif isinstance(values[0], int):
            feature.int64_list.value.extend(values)
        else:
            feature.float_list.value.extend(values)
    return example.SerializeToString()


def test_part_names_sort_in_input_order():
    names = [out.part_name(f, s, s + 10, "csv") for f in (0, 1, 10) for s in (0, 10, 990)]
    assert sorted(names) == names
    assert names[0] == "part-00000-0000000000-0000000010.csv"


def test_prediction_columns_shapes_and_errors():
    assert out.prediction_columns(np.arange(3.0), 3)["prediction"].shape == (3, 1)
    assert out.prediction_columns(np.zeros((3, 10)), 3)["prediction"].shape == (3, 10)
    named = out.prediction_columns({"score": np.zeros(3), "embedding": np.zeros((3, 2, 2))}, 3)
    assert {k: v.shape for k, v in named.items()} == {"score": (3, 1), "embedding": (3, 4)}
    with pytest.raises(ValueError, match="returned 2 prediction\\(s\\) for 3 record\\(s\\)"):
        out.prediction_columns(np.zeros(2), 3)


def test_default_kept_columns_are_the_ids():
    assert out.default_kept_columns(["id", "x0", "user_id", "label", "idea"]) == ["id", "user_id"]


def test_recordio_and_csv_parts_round_trip(tmp_path):
    records = [record(id=[i], name=[f"n,{i}\n".encode()], x=[0.5, 1.5]) for i in range(3)]
    predictions = {"prediction": np.array([[0.1, 0.2], [1.0, 2.0], [3.0, 4.0]], np.float32)}
    kept = ["id", "name", "x"]
    rec_path = out.write_part(
        str(tmp_path), "p.recordio", out.encode_part("recordio", records, kept, predictions)
    )
    rows = out.read_rows(rec_path, "recordio")
    assert rows[1] == {"id": [1], "name": ["n,1\n"], "x": [0.5, 1.5], "prediction": [1.0, 2.0]}
    csv_path = out.write_part(
        str(tmp_path), "p.csv", out.encode_part("csv", records, kept, predictions)
    )
    rows = out.read_rows(csv_path, "csv")
    assert list(rows[0]) == ["id", "name", "x", "prediction_0", "prediction_1"]
    assert rows[2] == {
        "id": "2",
        "name": "n,2\n",
        "x": "0.5 1.5",
        "prediction_0": "3.0",
        "prediction_1": "4.0",
    }
    assert np.float32(rows[0]["prediction_0"]) == np.float32(0.1), "shortest round-trip form"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.csv", "p.recordio"], "no temp left"


def test_a_rewritten_part_replaces_the_first(tmp_path):
    out.write_part(str(tmp_path), "part-a", b"first attempt, longer")
    out.write_part(str(tmp_path), "part-a", b"retry")
    assert (tmp_path / "part-a").read_bytes() == b"retry"
    with pytest.raises(ValueError, match="--output_format must be one of recordio, csv"):
        out.encode_part("parquet", [], [], {})
