"""Task records through a model file's `custom_data_reader` (ElasticDL v0.2's hook).

`custom_data_reader(data_origin, records_per_task=None, **kwargs)` returns a data reader
(usually `RecordIODataReader` or a subclass, `elasticdl.python.data.reader`). The worker
creates one per data file (`data_origin` is the file's URL) and reads each task's records
with `read_records(task)` then `preprocess_records(records)`; the master plans the tasks from
the data files as for any job. `CustomReaders` has the worker's reader interface:
`get(url).read(start, end)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any


class _FileRecords:
    def __init__(self, reader: Any, url: str) -> None:
        self._reader = reader
        self._url = url

    def read(self, start: int, end: int) -> Iterator[bytes]:
        from elasticdl.python.data.reader.data_reader import ReaderTask

        records = self._reader.read_records(ReaderTask(self._url, start, end))
        for record in self._reader.preprocess_records(records):
            if not isinstance(record, bytes | bytearray):
                raise TypeError(
                    f"custom_data_reader: {type(self._reader).__name__}.read_records gave a "
                    f"{type(record).__name__}; each record must be a serialized tf.train.Example"
                )
            yield bytes(record)


class CustomReaders:
    """One model-file reader per data file, made on first use."""

    def __init__(self, factory: Callable[..., Any], records_per_task: int) -> None:
        self._factory = factory
        self._records_per_task = records_per_task
        self._readers: dict[str, Any] = {}

    def get(self, url: str) -> _FileRecords:
        reader = self._readers.get(url)
        if reader is None:
            reader = self._factory(url, records_per_task=self._records_per_task)
            if not callable(getattr(reader, "read_records", None)):
                raise TypeError(
                    "custom_data_reader(data_origin, records_per_task) must return a data "
                    f"reader with read_records(task), not {type(reader).__name__}"
                )
            self._readers[url] = reader
        return _FileRecords(reader, url)


def readers_for(config: Any) -> CustomReaders | None:
    """The model file's readers, or None when it defines no `custom_data_reader`."""
    factory = config.load_spec().custom_data_reader
    if factory is None:
        return None
    return CustomReaders(factory, config.records_per_task)
