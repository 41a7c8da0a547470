"""The COLUMN clause as data: which columns feed the model, in which order, and how.

SQLFlow's statements say it with feature-column calls::

    COLUMN sepal_length, sepal_width FOR linear_feature_columns
    COLUMN EMBEDDING(CATEGORY_HASH(city, 1000), 8), BUCKET(age, [18, 30, 65])
        FOR dnn_feature_columns

and `elasticdl train --feature_columns` takes the same text. Each `COLUMN ... [FOR name]` is a
`ColumnGroup`, handed to the model's constructor argument `name` (`feature_columns` without
FOR). The calls:

| call                                   | meaning                                               |
|----------------------------------------|-------------------------------------------------------|
| `col`                                  | the column as its data type suggests (below)          |
| `NUMERIC(col[, shape])`                | numbers, as they are                                  |
| `CATEGORY_ID(col, n)`                  | integer ids in [0, n)                                 |
| `CATEGORY_HASH(col, n)`                | values hashed into n buckets                          |
| `BUCKET(col, [b1, b2, ...])`           | numbers cut at the boundaries: ids in [0, len + 1)    |
| `INDICATOR(categorical)`               | a categorical column one-hot (multi-hot)              |
| `EMBEDDING(categorical, dim[, comb])` | embedded, combined by `mean`, `sum` or `sqrtn` |

A plain `col` (and a column with no COLUMN clause at all, when the constructor takes
`feature_columns`) is resolved against the data (`resolve`): numbers are NUMERIC; text is
EMBEDDING(CATEGORY_HASH(col, 1000), 8). Any other call (DENSE, SPARSE, CROSS, ...) is refused in
one line. Resolution also checks every named column exists with a type the call can read, and
records each column's type, length and statistics, so the resolved form (`to_json`) is all a
parameter server, worker or prediction job needs: they never see the data's schema again.

From the resolved form: `tf_feature_columns` builds `tf.feature_column` objects (SQLFlow zoo
classes feed them to Keras 2's `DenseFeatures`), `field_metas` SQLFlow's per-field dict, and
`parse_spec` what the built-in input function parses. The built-in models' Keras 3 layers are
in the model zoo (`zoo_common/features.py`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from elasticdl.runtime.sql.lexer import StatementError, Tok, describe, tokenize

DEFAULT_HASH_BUCKETS = 1000
DEFAULT_EMBEDDING_DIM = 8
COMBINERS = ("mean", "sum", "sqrtn")
DEFAULT_TARGET = "feature_columns"


@dataclass(frozen=True)
class Field:
    """A column as it is; `resolve` decides what it is from the data."""

    name: str


@dataclass(frozen=True)
class Numeric:
    name: str
    shape: tuple[int, ...] = (1,)


@dataclass(frozen=True)
class CategoryId:
    name: str
    buckets: int


@dataclass(frozen=True)
class CategoryHash:
    name: str
    buckets: int


@dataclass(frozen=True)
class Bucket:
    name: str
    boundaries: tuple[float, ...]

    @property
    def buckets(self) -> int:
        return len(self.boundaries) + 1


@dataclass(frozen=True)
class Indicator:
    source: CategoryId | CategoryHash | Bucket | Field


@dataclass(frozen=True)
class Embedding:
    source: CategoryId | CategoryHash | Bucket | Field
    dimension: int
    combiner: str = "mean"


Column = Field | Numeric | CategoryId | CategoryHash | Bucket | Indicator | Embedding
Categorical = CategoryId | CategoryHash | Bucket


@dataclass(frozen=True)
class ColumnGroup:
    """One `COLUMN ... [FOR target]` clause."""

    columns: tuple[Column, ...]
    target: str | None = None

    @property
    def argument(self) -> str:
        """The constructor argument this group is given as."""
        return self.target or DEFAULT_TARGET


SUPPORTED_CALLS = ("NUMERIC", "CATEGORY_ID", "CATEGORY_HASH", "BUCKET", "INDICATOR", "EMBEDDING")
_SQLFLOW_ONLY = ("DENSE", "SPARSE", "SEQ_CATEGORY_ID", "WEIGHTED_CATEGORY", "CROSS")


# -- reading the clause -------------------------------------------------------------------------


class ColumnParser:
    """The COLUMN clauses' grammar over the project's tokens (runtime/sql/lexer.py)::

    clauses := ("COLUMN" expr ("," expr)* ["FOR" name])+
    expr    := name | CALL "(" arg ("," arg)* ")"
    arg     := expr | number | "[" number ("," number)* "]" | 'string'
    """

    def __init__(self, text: str, toks: list[Tok], i: int = 0) -> None:
        self.text, self.toks, self.i = text, toks, i

    @property
    def tok(self) -> Tok:
        return self.toks[self.i]

    def fail(self, expected: str, tok: Tok | None = None) -> StatementError:
        tok = tok or self.tok
        return StatementError(f"expected {expected}, got {describe(tok)}", self.text, tok.pos)

    def groups(self) -> tuple[ColumnGroup, ...]:
        """Every `COLUMN ...` clause from the current token on."""
        found: list[tuple[Tok, ColumnGroup]] = []
        while self.tok.word("COLUMN"):
            keyword = self.tok
            self.i += 1
            columns = [self.expr()]
            while self.tok.op(","):
                self.i += 1
                columns.append(self.expr())
            target = None
            if self.tok.word("FOR"):
                self.i += 1
                start = self.tok
                target = self.name("a model argument name after FOR")
                if target in [g.target for _, g in found]:
                    raise StatementError(f"two COLUMN clauses FOR {target}", self.text, start.pos)
            found.append((keyword, ColumnGroup(tuple(columns), target)))
        if len(found) > 1:
            for keyword, group in found:
                if group.target is None:
                    raise StatementError(
                        "several COLUMN clauses need FOR <argument> on each (the model argument "
                        "each group of columns is given as)",
                        self.text,
                        keyword.pos,
                    )
        return tuple(group for _, group in found)

    def name(self, what: str) -> str:
        tok = self.tok
        if tok.kind == "word":
            self.i += 1
            return tok.text
        if tok.kind == "quoted" and tok.text[0] in '"`':
            from elasticdl.runtime.sql.lexer import check_quoted_name

            check_quoted_name(tok, self.text)
            self.i += 1
            return tok.text[1:-1]
        raise self.fail(what)

    def expr(self) -> Column:
        start = self.tok
        name = self.name("a column name or a feature column call such as NUMERIC(col)")
        if not self.tok.op("("):
            if start.kind == "word" and name.upper() in SUPPORTED_CALLS + _SQLFLOW_ONLY:
                raise self.fail(f"'(' after {name.upper()}")
            return Field(name)
        call = name.upper()
        if call not in SUPPORTED_CALLS:
            supported = ", ".join(SUPPORTED_CALLS)
            what = (
                "a SQLFlow call this project does not support"
                if call in _SQLFLOW_ONLY
                else ("not a feature column call")
            )
            raise StatementError(
                f"COLUMN {call}(...) is {what}; supported: {supported} (or a plain column name)",
                self.text,
                start.pos,
            )
        self.i += 1
        args: list[tuple[Tok, Any]] = []
        while not self.tok.op(")"):
            args.append((self.tok, self.arg()))
            if self.tok.op(","):
                self.i += 1
            elif not self.tok.op(")"):
                raise self.fail(f"',' or ')' in {call}(...)")
        self.i += 1
        return self._build(call, start, args)

    def arg(self) -> Any:
        tok = self.tok
        if tok.op("-") and self.toks[self.i + 1].kind == "number":
            self.i += 1
            return -self.arg()
        if tok.kind == "number":
            self.i += 1
            try:
                return int(tok.text) if tok.text.isdigit() else float(tok.text)
            except ValueError:
                raise StatementError(f"invalid number {tok.text!r}", self.text, tok.pos) from None
        if tok.op("["):
            self.i += 1
            items = []
            while not self.tok.op("]"):
                items.append(self.arg())
                if self.tok.op(","):
                    self.i += 1
                elif not self.tok.op("]"):
                    raise self.fail("',' or ']' in the list")
            self.i += 1
            return items
        if tok.kind == "quoted" and tok.text[0] == "'":
            from elasticdl.runtime.sql.lexer import unquote

            self.i += 1
            return unquote(tok)
        return self.expr()

    def _build(self, call: str, start: Tok, args: list[tuple[Tok, Any]]) -> Column:
        def bad(message: str, at: Tok | None = None) -> StatementError:
            return StatementError(f"{call}: {message}", self.text, (at or start).pos)

        def count(low: int, high: int, usage: str) -> None:
            if not low <= len(args) <= high:
                raise bad(f"expected {usage}, got {len(args)} argument(s)")

        def column_name(k: int) -> str:
            tok, value = args[k]
            if isinstance(value, Field):
                return value.name
            raise bad("expected a column name", tok)

        def positive(k: int, what: str) -> int:
            tok, value = args[k]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise bad(f"{what} must be a positive integer, got {value!r}", tok)
            return value

        def categorical(k: int) -> Categorical | Field:
            tok, value = args[k]
            if isinstance(value, CategoryId | CategoryHash | Bucket | Field):
                return value
            raise bad("expected a categorical column (CATEGORY_ID, CATEGORY_HASH, BUCKET)", tok)

        if call == "NUMERIC":
            count(1, 2, "NUMERIC(col[, shape])")
            shape: tuple[int, ...] = (1,)
            if len(args) == 2:
                tok, value = args[1]
                dims = value if isinstance(value, list) else [value]
                if not dims or any(
                    isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims
                ):
                    raise bad(
                        f"shape must be a positive integer or a list of them, got {value!r}", tok
                    )
                shape = tuple(dims)
            return Numeric(column_name(0), shape)
        if call in ("CATEGORY_ID", "CATEGORY_HASH"):
            count(2, 2, f"{call}(col, bucket_size)")
            cls = CategoryId if call == "CATEGORY_ID" else CategoryHash
            return cls(column_name(0), positive(1, "the bucket size"))
        if call == "BUCKET":
            count(2, 2, "BUCKET(col, [boundary, ...])")
            tok, source = args[0]
            if isinstance(source, Numeric):
                source = Field(source.name)
            name = column_name(0) if not isinstance(source, Field) else source.name
            tok, bounds = args[1]
            numbers = isinstance(bounds, list) and all(
                isinstance(b, int | float) and not isinstance(b, bool) for b in bounds
            )
            if not numbers or not bounds or list(bounds) != sorted(set(bounds)):
                raise bad("boundaries must be a list of increasing numbers, e.g. [0, 10, 100]", tok)
            return Bucket(name, tuple(float(b) for b in bounds))
        if call == "INDICATOR":
            count(1, 1, "INDICATOR(categorical column)")
            return Indicator(categorical(0))
        count(2, 3, "EMBEDDING(categorical column, dimension[, combiner])")
        combiner = "mean"
        if len(args) == 3:
            tok, combiner = args[2]
            if combiner not in COMBINERS:
                raise bad(f"combiner must be one of {', '.join(COMBINERS)}, got {combiner!r}", tok)
        return Embedding(categorical(0), positive(1, "the dimension"), combiner)


def parse_groups(text: str) -> tuple[ColumnGroup, ...]:
    """The groups of a `--feature_columns` value: `COLUMN a, b FOR x COLUMN c FOR y`, or a
    single group's columns without the word COLUMN (`a, NUMERIC(b, 3)`)."""
    toks = tokenize(text)
    if toks[0].kind == "eof":
        return ()
    if not toks[0].word("COLUMN"):
        toks = [Tok("word", "COLUMN", 0, 0), *toks]
    parser = ColumnParser(text, toks)
    groups = parser.groups()
    if parser.tok.kind != "eof":
        raise parser.fail("COLUMN, ',' or the end")
    return groups


def to_text(groups: Sequence[ColumnGroup]) -> str:
    """The groups as COLUMN clauses (what `parse_groups` reads back)."""
    return " ".join(
        "COLUMN "
        + ", ".join(_text(c) for c in g.columns)
        + (f" FOR {g.target}" if g.target else "")
        for g in groups
    )


def _text(column: Column) -> str:
    if isinstance(column, Field):
        return column.name
    if isinstance(column, Numeric):
        shape = list(column.shape) if len(column.shape) > 1 else column.shape[0]
        return f"NUMERIC({column.name}, {shape})"
    if isinstance(column, CategoryId | CategoryHash):
        call = "CATEGORY_ID" if isinstance(column, CategoryId) else "CATEGORY_HASH"
        return f"{call}({column.name}, {column.buckets})"
    if isinstance(column, Bucket):
        return f"BUCKET({column.name}, [{', '.join(repr(b) for b in column.boundaries)}])"
    if isinstance(column, Indicator):
        return f"INDICATOR({_text(column.source)})"
    return f"EMBEDDING({_text(column.source)}, {column.dimension}, '{column.combiner}')"


def names_in(groups: Sequence[ColumnGroup]) -> list[str]:
    """The data columns the groups read, in order of first use."""
    found: list[str] = []
    for group in groups:
        for column in group.columns:
            name = _source_name(column)
            if name not in found:
                found.append(name)
    return found


def _source_name(column: Column) -> str:
    while isinstance(column, Indicator | Embedding):
        column = column.source
    return column.name


# -- resolving against the data -------------------------------------------------------------------


@dataclass(frozen=True)
class DataColumn:
    """What the data says of one column: kind (float, int64, bytes), length, statistics."""

    kind: str
    length: int = 1
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class ResolvedFeatures:
    """Groups with every Field decided, plus the data columns they read (module docstring)
    and the label's (its statistics let a regressor learn a standardized label)."""

    groups: tuple[ColumnGroup, ...]
    inputs: dict[str, DataColumn]
    label: DataColumn | None = None

    def to_json(self) -> str:
        return json.dumps(
            {
                "groups": [
                    {"target": g.target, "columns": [_encode(c) for c in g.columns]}
                    for g in self.groups
                ],
                "inputs": {n: _column_json(c) for n, c in self.inputs.items()},
                "label": _column_json(self.label) if self.label is not None else None,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> ResolvedFeatures:
        data = json.loads(text)
        groups = tuple(
            ColumnGroup(tuple(_decode(c) for c in g["columns"]), g.get("target"))
            for g in data["groups"]
        )
        inputs = {n: _column_of(c) for n, c in data["inputs"].items()}
        label = data.get("label")
        return cls(groups, inputs, _column_of(label) if label else None)

    def group(self, argument: str) -> ColumnGroup | None:
        for group in self.groups:
            if group.argument == argument:
                return group
        return None

    @property
    def arguments(self) -> list[str]:
        return [g.argument for g in self.groups]

    def subset(self, group: ColumnGroup) -> ResolvedFeatures:
        """The one group, with the inputs it reads (and the label)."""
        inputs = {n: self.inputs[n] for n in names_in((group,))}
        return ResolvedFeatures((group,), inputs, self.label)


def _column_json(column: DataColumn) -> dict[str, Any]:
    return {"kind": column.kind, "length": column.length, "stats": column.stats}


def _column_of(data: dict[str, Any]) -> DataColumn:
    return DataColumn(data["kind"], int(data["length"]), dict(data.get("stats") or {}))


_KINDS = {
    "Field": Field,
    "Numeric": Numeric,
    "CategoryId": CategoryId,
    "CategoryHash": CategoryHash,
    "Bucket": Bucket,
    "Indicator": Indicator,
    "Embedding": Embedding,
}


def _encode(column: Column) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": type(column).__name__}
    for key, value in vars(column).items():
        out[key] = _encode(value) if isinstance(value, tuple(_KINDS.values())) else value
    return out


def _decode(data: dict[str, Any]) -> Column:
    values = dict(data)
    cls = _KINDS[values.pop("kind")]
    for key, value in values.items():
        if isinstance(value, dict) and "kind" in value:
            values[key] = _decode(value)
        elif isinstance(value, list):
            values[key] = tuple(value)
    return cls(**values)


def resolve(
    groups: Sequence[ColumnGroup],
    columns: dict[str, DataColumn],
    label: str | None,
    exclude: Sequence[str] = ("id",),
) -> ResolvedFeatures:
    """Decide every Field against the data's `columns` (no groups: one group of every column
    but the label and `exclude`); ValueError naming a missing column or a type a call cannot
    read."""
    if not groups:
        names = [n for n in columns if n != label and n not in exclude]
        if not names:
            raise ValueError(
                f"no feature columns: the data has {sorted(columns)} and {label!r} is the label"
            )
        groups = (ColumnGroup(tuple(Field(n) for n in names)),)
    resolved = tuple(
        ColumnGroup(tuple(_resolve(c, columns, label) for c in g.columns), g.target) for g in groups
    )
    inputs = {name: columns[name] for name in names_in(resolved)}
    return ResolvedFeatures(resolved, inputs, columns.get(label) if label else None)


def _data(name: str, columns: dict[str, DataColumn], label: str | None) -> DataColumn:
    if name not in columns:
        raise ValueError(
            f"COLUMN {name}: the data has no column {name!r}; its columns are {sorted(columns)}"
        )
    if name == label:
        raise ValueError(f"COLUMN {name}: {name!r} is the label; a label is not a feature")
    return columns[name]


def _resolve(column: Column, columns: dict[str, DataColumn], label: str | None) -> Column:
    if isinstance(column, Indicator | Embedding):
        source = column.source
        if isinstance(source, Field):
            source = _categorical(source.name, _data(source.name, columns, label))
        else:
            source = _resolve(source, columns, label)  # type: ignore[assignment]
        if isinstance(column, Indicator):
            return Indicator(source)
        return Embedding(source, column.dimension, column.combiner)
    data = _data(column.name, columns, label)
    if isinstance(column, Field):
        if data.kind == "bytes":
            return Embedding(_categorical(column.name, data), DEFAULT_EMBEDDING_DIM)
        return Numeric(column.name, (data.length,))
    text = data.kind == "bytes"
    if isinstance(column, Numeric | Bucket) and text:
        raise ValueError(f"COLUMN {_text(column)}: {column.name!r} holds text, not numbers")
    if isinstance(column, CategoryId) and data.kind != "int64":
        raise ValueError(
            f"COLUMN {_text(column)}: {column.name!r} holds {data.kind}, not integer ids; use "
            f"CATEGORY_HASH({column.name}, n) for text"
        )
    if isinstance(column, Numeric) and _size(column.shape) != data.length:
        raise ValueError(
            f"COLUMN {_text(column)}: {column.name!r} holds {data.length} value(s) per row, "
            f"not {_size(column.shape)}"
        )
    return column


def _categorical(name: str, data: DataColumn) -> Categorical:
    """A plain column used as a category: ids as they are when they are small integers, text
    (or any other number) hashed."""
    if data.kind == "int64":
        top = data.stats.get("max")
        low = data.stats.get("min")
        if isinstance(top, int | float) and isinstance(low, int | float) and low >= 0:
            return CategoryId(name, int(top) + 1)
    distinct = int(data.stats.get("distinct_estimate") or 0)
    buckets = max(DEFAULT_HASH_BUCKETS, 2 * distinct) if distinct else DEFAULT_HASH_BUCKETS
    return CategoryHash(name, buckets)


def _size(shape: Sequence[int]) -> int:
    size = 1
    for dim in shape:
        size *= dim
    return size


def data_columns(metadata: Any) -> dict[str, DataColumn]:
    """The columns of a `DatasetMetadata` (runtime/data/metadata.py) with their statistics."""
    stats = {
        c["name"]: dict(c.get("stats") or {})
        for c in ((metadata.schema or {}).get("columns") or [])
    }
    return {
        name: DataColumn(info.kind, info.length, stats.get(name, {}))
        for name, info in metadata.columns.items()
    }


# -- building from the resolved form --------------------------------------------------------------


_TF_DTYPES = {"float": "float32", "int64": "int64", "bytes": "string"}


def parse_spec(features: ResolvedFeatures) -> dict[str, tuple[str, int]]:
    """Input column -> (TensorFlow dtype name, values per row): what the input function
    parses from each record."""
    return {n: (_TF_DTYPES[c.kind], c.length) for n, c in features.inputs.items()}


def field_metas(features: ResolvedFeatures) -> dict[str, dict[str, Any]]:
    """SQLFlow's `field_metas` argument: per input column its name, dtype, shape."""
    return {
        name: {
            "feature_name": name,
            "name": name,
            "dtype": _TF_DTYPES[c.kind],
            "shape": [c.length],
            "delimiter": "",
            "is_sparse": False,
        }
        for name, c in features.inputs.items()
    }


def tf_feature_columns(group: ColumnGroup, features: ResolvedFeatures) -> list[Any]:
    """`tf.feature_column` objects for a resolved group (Keras 2's DenseFeatures reads them)."""
    return [_tf_column(c, features) for c in group.columns]


def _tf_column(column: Column, features: ResolvedFeatures) -> Any:
    import tensorflow as tf

    fc = tf.feature_column
    if isinstance(column, Numeric):
        return fc.numeric_column(column.name, shape=column.shape)
    if isinstance(column, CategoryId):
        return fc.categorical_column_with_identity(column.name, column.buckets)
    if isinstance(column, CategoryHash):
        kind = features.inputs[column.name].kind
        dtype = tf.string if kind == "bytes" else tf.int64
        return fc.categorical_column_with_hash_bucket(column.name, column.buckets, dtype=dtype)
    if isinstance(column, Bucket):
        return fc.bucketized_column(fc.numeric_column(column.name), list(column.boundaries))
    if isinstance(column, Indicator):
        return fc.indicator_column(_tf_column(column.source, features))
    if isinstance(column, Embedding):
        source = _tf_column(column.source, features)
        return fc.embedding_column(source, column.dimension, combiner=column.combiner)
    raise TypeError(f"unresolved column {column!r}")
