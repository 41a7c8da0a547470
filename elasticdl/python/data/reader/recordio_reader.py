"""ElasticDL v0.2's `RecordIODataReader`, reading this project's RecordIO files.

`RecordIODataReader(data_dir=LOCATION)`: LOCATION is a file, a directory (its data files) or
a glob, as for `--data` (any fsspec URL). A model file's `custom_data_reader(data_origin,
records_per_task=None, **kwargs)` usually returns one of these, or a subclass that overrides
`read_records` or `preprocess_records`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from elasticdl.python.data.reader.data_reader import (
    AbstractDataReader,
    Metadata,
    ReaderTask,
    check_required_kwargs,
)


class RecordIODataReader(AbstractDataReader):
    """Records of RecordIO files; each is a serialized `tf.train.Example`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_required_kwargs(["data_dir"], self._kwargs)
        self._open: dict[str, Any] = {}

    @property
    def data_dir(self) -> str:
        return str(self._kwargs["data_dir"])

    def read_records(self, task: ReaderTask) -> Iterator[bytes]:
        from elasticdl.runtime.data.recordio import RecordIOReader

        name = task.shard.name
        reader = self._open.get(name)
        if reader is None:
            reader = self._open[name] = RecordIOReader(name)
        yield from reader.read(task.shard.start, task.shard.end)

    def create_shards(self) -> dict[str, tuple[int, int]]:
        from elasticdl.runtime.data.planner import count_files

        return {url: (0, count) for url, count in count_files(self.data_dir)}

    @property
    def records_output_types(self) -> Any:
        import tensorflow as tf

        return tf.string

    @property
    def metadata(self) -> Metadata:
        return Metadata(column_names=None)

    def close(self) -> None:
        for reader in self._open.values():
            reader.close()
        self._open.clear()


__all__ = ["RecordIODataReader"]
