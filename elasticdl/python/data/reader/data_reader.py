"""ElasticDL v0.2's data reader interface, as the workers of this project call it.

A worker asks a model file's reader for the records of each task with `read_records(task)`
(then `preprocess_records(records)`), where `task` has v0.2's fields: `task.shard.name`,
`task.shard.start`, `task.shard.end` (and the older flat `task.shard_name`, `task.start`,
`task.end`). Each record must be a serialized `tf.train.Example`, as `dataset_fn` expects.
`create_shards()` returns `{file: (first record, number of records)}`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


class Metadata:
    """What a reader knows about its records (v0.2: the column names, or None)."""

    def __init__(self, column_names: list[str] | None) -> None:
        self.column_names = column_names


@dataclass(frozen=True)
class Shard:
    name: str
    start: int
    end: int


@dataclass(frozen=True)
class ReaderTask:
    """The records [start, end) of file `shard_name`, in v0.2's two spellings."""

    shard_name: str
    start: int
    end: int
    type: int = 0
    shard: Shard = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shard", Shard(self.shard_name, self.start, self.end))


class AbstractDataReader(ABC):
    """Base class of a model file's data reader."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = dict(kwargs)

    @abstractmethod
    def read_records(self, task: ReaderTask) -> Iterator[bytes]:
        """The records of `task`, in order."""

    def preprocess_records(self, records: Iterable[bytes]) -> Iterable[bytes]:
        """A hook over each task's records; the identity by default."""
        return records

    @abstractmethod
    def create_shards(self) -> dict[str, tuple[int, int]]:
        """`{file: (first record, number of records)}` of the reader's data."""

    @property
    def records_output_types(self) -> Any:
        return None

    @property
    def metadata(self) -> Metadata:
        return Metadata(column_names=None)


def check_required_kwargs(required_args: Iterable[str], kwargs: Mapping[str, Any]) -> None:
    """One ValueError naming the keyword arguments that are missing."""
    missing = [k for k in required_args if k not in kwargs]
    if missing:
        raise ValueError(f"the following required arguments are missing: {', '.join(missing)}")


__all__ = ["AbstractDataReader", "Metadata", "ReaderTask", "Shard", "check_required_kwargs"]
