"""SQLFlow-style statements: ``SELECT ... TRAIN ...`` and ``SELECT ... PREDICT ...``, parsed.

A hand-written tokenizer and recursive-descent parser; no database access, no ``eval``.
Keywords are case-insensitive. Grammar::

    statement    := select clause [";"]
    select       := ["WITH" ctes] "SELECT" ...    any SQL, kept verbatim (common table expressions
                                    included); it ends before the first word TRAIN or
                                    PREDICT outside strings, quoted identifiers, comments and
                                    parentheses (a column named train must be quoted)
    clause       := ["TO"] "TRAIN" model_def ["WITH" attr ("," attr)*] ["LABEL" ident] "INTO" model
                  | ["TO"] "PREDICT" ident "." ident ("." ident)* "USING" model
    model_def    := NAME ("." NAME)*
    attr         := NAME ("." NAME)* "=" value
    value        := ["-" | "+"] NUMBER | STRING | NAME ("." NAME)*
                  | "[" [value ("," value)* [","]] "]" | "(" [value ("," value)* [","]] ")"
    model        := NAME ("." NAME)* | STRING
    ident        := NAME | QUOTED_IDENT
    NAME         := [A-Za-z_][A-Za-z0-9_]*, not one of WITH LABEL INTO USING
    STRING       := '...' | "..."     a quote inside is doubled: 'it''s'
    QUOTED_IDENT := "..." | `...`     no quotes, control characters or line breaks inside

Values: integers and floats (``1e-3``), strings, ``True``/``False``, ``None``/``null`` (any
case), lists, tuples (``(x)`` is ``x``, as in Python) and dotted names, kept as the string they
spell (``optimizer=tf.keras.optimizers.Adam``). Comments (``-- ...``, ``/* ... */``) may appear
anywhere. Strings follow standard SQL: a backslash is an ordinary character.

Names in the results (tables, columns, label) are in *SQL form*: a bare identifier as written, a
quoted one with its quotes (``db."My Table"``). `split_identifier` gives the unquoted parts and
`quote_identifier` quotes a name for one database dialect; both validate it first.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# WITH keys `train.<key>` and `engine.<key>`, and the job option (`elasticdl train` flag) each sets.
TRAIN_KEYS: dict[str, str] = {
    "epoch": "num_epochs",
    "epochs": "num_epochs",
    "num_epochs": "num_epochs",
    "batch_size": "minibatch_size",
    "minibatch_size": "minibatch_size",
    "records_per_task": "records_per_task",
    "validation.select": "validation_select",
    "evaluation_steps": "evaluation_steps",
    "checkpoint_steps": "checkpoint_steps",
    "shuffle": "shuffle",
    "seed": "seed",
    "use_async": "use_async",
    "grads_to_wait": "grads_to_wait",
    "on_null": "on_null",
}
_ENGINE = "num_workers num_ps max_worker_relaunches task_timeout_floor intra_op_threads engine"
ENGINE_KEYS: dict[str, str] = {k: k for k in _ENGINE.split()}
ENGINES = ("local", "argo")
_BOOL_OPTIONS = {"shuffle", "use_async"}
_NUMBER_OPTIONS = {"task_timeout_floor"}
_CLAUSE_WORDS = {"WITH", "LABEL", "INTO", "USING"}
_QUOTES = "'\"`"
_DIALECT_QUOTES = {"sqlite": '"', "postgresql": '"', "postgres": '"', "mysql": "`", "mariadb": "`"}
# Words that end an expression rather than name it (used to spot `expr alias`).
_NOT_ALIAS = {"AND", "OR", "NOT", "IS", "NULL", "TRUE", "FALSE", "CASE", "WHEN", "THEN", "ELSE"}
_NOT_ALIAS |= {"END", "IN", "LIKE", "ILIKE", "BETWEEN", "AS", "DISTINCT", "ALL", "COLLATE"}
_NOT_ALIAS |= {"ESCAPE", "INTERVAL", "FROM", "SELECT", "ON", "ASC", "DESC", "USING"}
_JOIN_WORDS = {"JOIN", "NATURAL", "INNER", "CROSS", "LEFT", "RIGHT", "FULL", "OUTER"}
_FROM_END = {"WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "WINDOW", "FETCH", "FOR"}
_SET_OPS = {"UNION", "INTERSECT", "EXCEPT"}


class StatementError(ValueError):
    """A bad statement: what was expected, and (with the text) the line with a caret under it."""

    def __init__(self, message: str, text: str | None = None, pos: int | None = None):
        self.message, self.text, self.pos = message, text, pos
        self.line = self.column = None
        if text is None or pos is None:
            super().__init__(message)
            return
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        row = text[start : len(text) if end < 0 else end]
        self.line, self.column = text.count("\n", 0, pos) + 1, pos - start + 1
        caret = "".join("\t" if c == "\t" else " " for c in row[: pos - start]) + "^"
        where = f"line {self.line}, column {self.column}"
        super().__init__(f"{message} ({where}):\n  {row}\n  {caret}")

    def at(self, text: str, pos: int) -> StatementError:
        """The same error, pointing at `pos` in `text`."""
        return StatementError(self.message, text, pos)


@dataclass(frozen=True)
class SelectColumn:
    """One item of the SELECT list: its text as written, and its output name when known."""

    text: str
    name: str | None


@dataclass(frozen=True)
class ModelRef:
    """`INTO` / `USING` target: a name (bare or dotted) or a quoted location."""

    name: str
    has_scheme: bool  # "gs://...", "file:///...": a URL; otherwise a name under the model root

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class TrainStatement:
    select: str
    columns: tuple[SelectColumn, ...]
    tables: tuple[str, ...] | None  # None: the FROM clause is not a plain list of tables/joins
    model_def: str
    attributes: dict[str, Any]  # WITH keys as written; see split_with
    label: str | None  # None: no LABEL clause (the caller takes the last selected column)
    into: ModelRef

    def split_with(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        return split_with(self.attributes)


@dataclass(frozen=True)
class PredictStatement:
    select: str
    columns: tuple[SelectColumn, ...]
    tables: tuple[str, ...] | None
    result_table: str
    result_column: str
    using: ModelRef


@dataclass(frozen=True)
class _Tok:
    kind: str  # word, number, quoted, op, eof
    text: str
    pos: int
    end: int

    def word(self, *words: str) -> bool:
        return self.kind == "word" and self.text.upper() in words

    def op(self, *ops: str) -> bool:
        return self.kind == "op" and self.text in ops


def _tokenize(text: str) -> list[_Tok]:
    toks, i, n = [], 0, len(text)
    while i < n:
        c, start = text[i], i
        if c.isspace():
            i += 1
            continue
        if text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise StatementError("unterminated /* comment", text, i)
            i = j + 2
            continue
        if c in _QUOTES:
            i += 1
            while True:
                i = text.find(c, i)
                if i < 0:
                    what = "string" if c == "'" else f"quoted name or string ({c}...{c})"
                    raise StatementError(f"unterminated {what} starting here", text, start)
                if not text.startswith(c, i + 1):
                    break
                i += 2  # a doubled quote stands for one
            i += 1
            kind = "quoted"
        elif c.isascii() and (c.isalpha() or c == "_"):
            while i < n and text[i].isascii() and (text[i].isalnum() or text[i] == "_"):
                i += 1
            kind = "word"
        elif c.isdigit() or (c == "." and text[i + 1 : i + 2].isdigit()):
            while i < n and (text[i].isdigit() or text[i] == "."):
                i += 1
            exp = i + (text[i + 1 : i + 2] in ("+", "-"))
            if text[i : i + 1] in ("e", "E") and text[exp + 1 : exp + 2].isdigit():
                i = exp + 1
                while i < n and text[i].isdigit():
                    i += 1
            kind = "number"
        else:
            i += 1
            kind = "op"
        toks.append(_Tok(kind, text[start:i], start, i))
    end = toks[-1].end if toks else 0
    toks.append(_Tok("eof", "", end, end))
    return toks


def _unquote(tok: _Tok) -> str:
    q = tok.text[0]
    return tok.text[1:-1].replace(q + q, q)


def _check_quoted_ident(tok: _Tok, text: str) -> str:
    inner = tok.text[1:-1]
    bad = [c for c in inner if c in _QUOTES or ord(c) < 32 or ord(c) == 127]
    if not inner.strip() or bad:
        raise StatementError(
            "a quoted name must not be empty or contain quotes, control characters or line breaks",
            text,
            tok.pos,
        )
    return tok.text


def split_identifier(name: str) -> tuple[str, ...]:
    """`db."My Table"` -> ("db", "My Table"); StatementError unless every part is a NAME or a
    valid quoted identifier, with nothing else (no spaces, comments, operators) around them."""
    toks, parts, pos = _tokenize(name), [], 0
    for k, tok in enumerate(toks[:-1]):
        ok = tok.op(".") if k % 2 else tok.kind == "word" or tok.text[0] in '"`'
        if tok.pos != pos or not ok:
            raise StatementError(f"invalid SQL name {name!r}", name, pos)
        if not k % 2:
            parts.append(tok.text if tok.kind == "word" else _check_quoted_ident(tok, name)[1:-1])
        pos = tok.end
    if pos != len(name) or not parts or len(toks) % 2:
        raise StatementError(f"invalid SQL name {name!r}", name, pos)
    return tuple(parts)


def quote_identifier(name: str, dialect: str) -> str:
    """Validate `name` (SQL form, may be dotted) and quote each part for `dialect`: sqlite and
    postgresql use double quotes, mysql and mariadb backquotes."""
    q = _DIALECT_QUOTES.get(dialect.lower().split("+")[0])
    if q is None:
        raise ValueError(f"unknown SQL dialect {dialect!r}; use one of {sorted(_DIALECT_QUOTES)}")
    return ".".join(q + part + q for part in split_identifier(name))


def _route(key: str) -> tuple[str, str]:
    """Where a WITH key goes: ("model" | "train" | "engine", name); StatementError if unknown."""
    prefix, _, rest = key.partition(".")
    if prefix in ("train", "engine") and rest:
        table = TRAIN_KEYS if prefix == "train" else ENGINE_KEYS
        if rest not in table:
            close = difflib.get_close_matches(rest, table, n=1)
            hint = f"did you mean '{prefix}.{close[0]}'? " if close else ""
            valid = ", ".join(f"{prefix}.{k}" for k in table)
            raise StatementError(f"unknown WITH key '{key}': {hint}valid {prefix}.* keys: {valid}")
        return prefix, table[rest]
    if not rest or (prefix == "model" and "." not in rest):
        return "model", rest or key
    raise StatementError(
        f"unknown WITH key '{key}': a key is a model param (name or model.name), "
        "train.<key> or engine.<key>"
    )


def _check_option(option: str, value: Any) -> str | None:
    """Why `value` does not suit a train/engine option, or None."""
    if option == "engine":
        return None if value in ENGINES else f"must be one of {', '.join(ENGINES)}, got {value!r}"
    if option == "validation_select":
        try:
            toks = _tokenize(value) if isinstance(value, str) else []
        except StatementError:
            toks = []
        if not toks or not toks[0].word("SELECT") or any(t.op(";") for t in toks):
            return "must be a quoted SELECT statement, e.g. 'SELECT a, b FROM t WHERE ...'"
        return None
    if option == "on_null":
        return null_policy_problem(value)
    if option in _BOOL_OPTIONS:
        return None if isinstance(value, bool) else f"must be True or False, got {value!r}"
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if option in _NUMBER_OPTIONS:
        return None if number else f"must be a number, got {value!r}"
    return None if number and isinstance(value, int) else f"must be an integer, got {value!r}"


def null_policy_problem(value: Any) -> str | None:
    """Why `value` is not a NULL policy (error, skip or fill:VALUE), or None."""
    if value in ("error", "skip") or (isinstance(value, str) and value.startswith("fill:")):
        return None
    return f"expected error, skip or fill:VALUE (e.g. fill:0), got {value!r}"


def select_with_columns(select: str, items: Sequence[str]) -> str:
    """`select` with `items` (SQL text, already quoted by the caller) appended to its column list.

    Used to carry a table's key through a conversion the user did not ask for; refused
    (StatementError) where more columns would change the rows: DISTINCT, GROUP BY, HAVING, set
    operations, or no FROM.
    """
    toks = _tokenize(select)
    depth, from_pos = 0, None
    for tok in toks:
        depth += tok.op("(") - tok.op(")")
        if depth:
            continue
        if tok.word("DISTINCT", "GROUP", "HAVING", *_SET_OPS):
            raise StatementError(
                f"cannot add columns to a SELECT with {tok.text.upper()}: it would change its "
                "rows; select the key column yourself",
                select,
                tok.pos,
            )
        if from_pos is None and tok.word("FROM"):
            from_pos = tok.pos
    if from_pos is None:
        raise StatementError("the SELECT has no FROM clause", select, len(select))
    head = select[:from_pos].rstrip()
    return f"{head}, {', '.join(items)} {select[from_pos:]}"


def split_with(
    attributes: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """WITH attributes -> (model params, train options, engine options), keyed by param name and
    `elasticdl train` option name; `train.epoch=3` -> train {"num_epochs": 3}."""
    out: dict[str, dict[str, Any]] = {"model": {}, "train": {}, "engine": {}}
    seen: dict[tuple[str, str], str] = {}
    for key, value in attributes.items():
        section, name = _route(key)
        problem = None if section == "model" else _check_option(name, value)
        if problem:
            raise StatementError(f"WITH {key}: {problem}")
        if (section, name) in seen:
            raise StatementError(f"WITH {seen[section, name]} and {key} both set {name}")
        seen[section, name] = key
        out[section][name] = value
    return out["model"], out["train"], out["engine"]


def _describe(tok: _Tok) -> str:
    return "the end of the statement" if tok.kind == "eof" else repr(tok.text)


class _Parser:
    def __init__(self, text: str, toks: list[_Tok], i: int):
        self.text, self.toks, self.i = text, toks, i

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def fail(self, expected: str, tok: _Tok | None = None) -> StatementError:
        tok = tok or self.tok
        return StatementError(f"expected {expected}, got {_describe(tok)}", self.text, tok.pos)

    def name(self, what: str, quoted: bool = False, dotted: bool = True) -> list[str]:
        parts = []
        while True:
            tok = self.tok
            if tok.kind == "word" and tok.text.upper() not in _CLAUSE_WORDS:
                parts.append(tok.text)
            elif quoted and tok.kind == "quoted" and tok.text[0] in '"`':
                parts.append(_check_quoted_ident(tok, self.text))
            else:
                raise self.fail(what)
            self.i += 1
            if not (dotted and self.tok.op(".")):
                return parts
            self.i += 1

    def model(self, after: str) -> ModelRef:
        tok = self.tok
        if tok.kind == "quoted" and tok.text[0] in "'\"":
            value = _unquote(tok)
            if not value.strip() or any(c in value for c in "\0\r\n"):
                raise StatementError(
                    "a model location must be one line of text", self.text, tok.pos
                )
            self.i += 1
            scheme, sep, _ = value.partition("://")
            ok = scheme[:1].isalpha() and all(c.isalnum() or c in "+.-" for c in scheme)
            return ModelRef(value, bool(sep) and scheme.isascii() and ok)
        return ModelRef(".".join(self.name(f"a model name or a quoted URL after {after}")), False)

    def value(self) -> Any:
        tok = self.tok
        if tok.op("-", "+") and self.toks[self.i + 1].kind == "number":
            self.i += 1
            number = self.value()
            return -number if tok.text == "-" else number
        if tok.kind == "number":
            self.i += 1
            try:
                return int(tok.text) if tok.text.isdigit() else float(tok.text)
            except ValueError:
                raise StatementError(f"invalid number {tok.text!r}", self.text, tok.pos) from None
        if tok.kind == "quoted" and tok.text[0] in "'\"":
            self.i += 1
            return _unquote(tok)
        if tok.op("[", "("):
            return self.sequence()
        if tok.kind == "word" and tok.text.upper() not in _CLAUSE_WORDS:
            literals = {"TRUE": True, "FALSE": False, "NONE": None, "NULL": None}
            if tok.text.upper() in literals and not self.toks[self.i + 1].op("."):
                self.i += 1
                return literals[tok.text.upper()]
            return ".".join(self.name("a name after '.'"))
        raise self.fail("a value (number, 'string', True/False, None, [list] or name)")

    def sequence(self) -> list | tuple | Any:
        open_ = self.tok
        close = "]" if open_.text == "[" else ")"
        self.i += 1
        items, comma = [], False
        while not self.tok.op(close):
            items.append(self.value())
            if self.tok.op(","):
                self.i, comma = self.i + 1, True
            elif not self.tok.op(close):
                raise self.fail(f"',' or '{close}' in the {'list' if close == ']' else 'tuple'}")
        self.i += 1
        if close == "]":
            return items
        return items[0] if len(items) == 1 and not comma else tuple(items)

    def attributes(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        targets: dict[tuple[str, str], str] = {}
        while True:
            start = self.tok
            key = ".".join(self.name("a WITH key (name=value)"))
            if key in attrs:
                raise StatementError(f"duplicate WITH key '{key}'", self.text, start.pos)
            if not self.tok.op("="):
                raise self.fail(f"'=' after the WITH key '{key}'")
            self.i += 1
            value_tok = self.tok
            attrs[key] = self.value()
            try:
                target = _route(key)
            except StatementError as e:
                raise e.at(self.text, start.pos) from None
            problem = None if target[0] == "model" else _check_option(target[1], attrs[key])
            if problem:
                raise StatementError(f"WITH {key}: {problem}", self.text, value_tok.pos)
            if target in targets:
                raise StatementError(
                    f"WITH {targets[target]} and {key} both set {target[1]}", self.text, start.pos
                )
            targets[target] = key
            if not self.tok.op(","):
                return attrs
            self.i += 1

    def train(self, select: dict) -> TrainStatement:
        model_def = ".".join(self.name("a model definition after TRAIN (e.g. regressor.DNN)"))
        attrs, label, after = {}, None, "WITH, LABEL or INTO <model> after the TRAIN clause"
        if self.tok.word("WITH"):
            self.i += 1
            attrs, after = self.attributes(), "',', LABEL or INTO <model> after the WITH clause"
        if self.tok.word("LABEL"):
            self.i += 1
            label = self.name("a column name after LABEL", quoted=True, dotted=False)[0]
            after = "INTO <model> after the LABEL clause"
        if not self.tok.word("INTO"):
            raise self.fail(after)
        self.i += 1
        into = self.model("INTO")
        return TrainStatement(
            **select, model_def=model_def, attributes=attrs, label=label, into=into
        )

    def predict(self, select: dict) -> PredictStatement:
        start = self.tok
        parts = self.name("<table>.<column> after PREDICT", quoted=True)
        if len(parts) < 2:
            raise self.fail("'.' and a column: PREDICT <table>.<column>")
        if not self.tok.word("USING"):
            target = self.text[start.pos : self.toks[self.i - 1].end]
            raise self.fail(f"USING <model> after PREDICT {target}")
        self.i += 1
        using = self.model("USING")
        return PredictStatement(
            **select, result_table=".".join(parts[:-1]), result_column=parts[-1], using=using
        )

    def end(self) -> None:
        semicolon = self.tok.op(";")
        self.i += semicolon
        if self.tok.kind != "eof":
            why = "after ';': one statement at a time" if semicolon else "here: expected the end"
            raise StatementError(f"unexpected {_describe(self.tok)} {why}", self.text, self.tok.pos)


def _find_clause(text: str, toks: list[_Tok]) -> tuple[int, list[int]]:
    """Index of the top-level TRAIN/PREDICT token, and the paren depth of each token before it."""
    if not toks[0].word("SELECT", "WITH"):
        raise StatementError(
            "expected SELECT at the start of the statement (or WITH ... SELECT)", text, toks[0].pos
        )
    opens: list[_Tok] = []
    depths = []
    for k, tok in enumerate(toks):
        if tok.op(")"):
            if not opens:
                raise StatementError("unexpected ')' without a matching '('", text, tok.pos)
            opens.pop()
        depths.append(len(opens))
        if not opens and tok.word("TRAIN", "PREDICT"):
            return k, depths
        if not opens and (tok.op(";") or tok.kind == "eof"):
            found = "unexpected ';', " if tok.op(";") else ""
            raise StatementError(
                f"{found}expected a TRAIN or PREDICT clause: SELECT ... TRAIN <model_def> "
                "[WITH k=v, ...] [LABEL col] INTO <model>, or SELECT ... PREDICT "
                "<table>.<column> USING <model>",
                text,
                tok.pos,
            )
        if tok.op("("):
            opens.append(tok)
    raise StatementError("'(' is never closed", text, opens[-1].pos)


def _output_name(item: list[_Tok]) -> str | None:
    def is_name(t: _Tok) -> bool:
        return (t.kind == "word" and t.text.upper() not in _NOT_ALIAS) or (
            t.kind == "quoted" and t.text[0] in '"`'
        )

    last = item[-1]
    if all(is_name(t) if k % 2 == 0 else t.op(".") for k, t in enumerate(item)) and len(item) % 2:
        return last.text  # a column, maybe qualified
    if len(item) >= 2 and is_name(last):
        prev = item[-2]
        if prev.word("AS") or is_name(prev) or prev.kind in ("number", "quoted") or prev.op(")"):
            return last.text  # an alias, with or without AS
    return None


def _is_ident(tok: _Tok) -> bool:
    return tok.kind == "word" or (tok.kind == "quoted" and tok.text[0] in '"`')


def _tables(toks: list[_Tok], depths: list[int]) -> tuple[str, ...] | None:
    """The tables of a FROM list of names and joins (aliases dropped); None for anything else."""
    tables, j, n = [], 0, len(toks)
    while j < n:
        if not _is_ident(toks[j]) or toks[j].word(*_NOT_ALIAS, *_JOIN_WORDS, "LATERAL"):
            return None
        parts, j = [toks[j].text], j + 1
        while j + 1 < n and toks[j].op(".") and _is_ident(toks[j + 1]):
            parts, j = [*parts, toks[j + 1].text], j + 2
        tables.append(".".join(parts))
        if j < n and toks[j].word("AS"):
            j += 1
        if j < n and _is_ident(toks[j]) and not toks[j].word(*_JOIN_WORDS, "ON", "USING"):
            j += 1  # an alias
        if j < n and toks[j].word("ON", "USING"):
            while j < n and not (
                depths[j] == 0 and (toks[j].op(",") or toks[j].word(*_JOIN_WORDS))
            ):
                j += 1
        if j == n:
            return tuple(tables)
        if toks[j].op(","):
            j += 1
            continue
        while j < n and toks[j].word(*_JOIN_WORDS - {"JOIN"}):
            j += 1
        if j == n or not toks[j].word("JOIN"):
            return None
        j += 1
    return None  # a trailing ',' or JOIN


def _main_select(text: str, toks: list[_Tok], depths: list[int], head: int) -> int:
    """Index of the main SELECT: 0, or after `WITH [RECURSIVE] name [(cols)] AS (...), ...`."""
    if not toks[0].word("WITH"):
        return 0
    for k in range(1, head):
        if depths[k] == 0 and toks[k].word("SELECT"):
            if not any(toks[j].op("(") for j in range(1, k)):
                break
            return k
    raise StatementError(
        "expected WITH name AS (SELECT ...), ... SELECT ... after WITH", text, toks[0].pos
    )


def _analyze_select(text: str, toks: list[_Tok], depths: list[int], head: int) -> dict:
    """The SELECT (tokens before `head`) as written, its columns and, when simple, its tables.

    After common table expressions (`WITH name AS (...), ... SELECT`) the columns are the main
    SELECT's, and the tables None: its FROM may name the expressions, not tables."""
    main = _main_select(text, toks, depths, head)
    first = main + (2 if head > main + 1 and toks[main + 1].word("DISTINCT", "ALL") else 1)
    top = [k for k in range(first, head) if depths[k] == 0]
    from_k = next((k for k in top if toks[k].word("FROM")), head)
    columns, start = [], first
    for k in [k for k in top if k < from_k and toks[k].op(",")] + [from_k]:
        if k == start:
            if toks[k].op(","):
                raise StatementError("expected a column before ','", text, toks[k].pos)
            if k != first:
                raise StatementError("expected a column after ','", text, toks[k].pos)
            hint = " (quote a column named train or predict)" if k == head else ""
            raise StatementError(f"expected the columns after SELECT{hint}", text, toks[k].pos)
        columns.append(
            SelectColumn(text[toks[start].pos : toks[k - 1].end], _output_name(toks[start:k]))
        )
        start = k + 1
    tables: tuple[str, ...] | None = ()
    if main or any(toks[k].word(*_SET_OPS) for k in top):
        tables = None
    elif from_k < head:
        end = next((k for k in top if k > from_k and toks[k].word(*_FROM_END)), head)
        tables = _tables(toks[from_k + 1 : end], depths[from_k + 1 : end])
    select = text[toks[0].pos : toks[head - 1].end]
    return {"select": select, "columns": tuple(columns), "tables": tables}


def parse_statement(text: str) -> TrainStatement | PredictStatement:
    """Parse one `SELECT ... TRAIN ...` or `SELECT ... PREDICT ...` statement (module docstring)."""
    toks = _tokenize(text)
    k, depths = _find_clause(text, toks)
    head = k - 1 if toks[k - 1].word("TO") else k
    select = _analyze_select(text, toks, depths, head)
    parser = _Parser(text, toks, k + 1)
    stmt = parser.train(select) if toks[k].word("TRAIN") else parser.predict(select)
    parser.end()
    return stmt
