"""Statements: SQLFlow's `SELECT ... TO TRAIN/PREDICT/EVALUATE ...` and the older form, parsed.

The SELECT is the database's SQL, read by sqlglot in the database's dialect (select_part.py);
what follows it has one grammar of its own (tokens: lexer.py), with keywords in any case::

    statement := select clause [";"]
    clause    := ["TO"] "TRAIN" model_def [WITH attrs] columns [LABEL ident] [USING model]
                     INTO model
               | ["TO"] "PREDICT" ident "." ident ("." ident)* [WITH attrs] USING model
               | "TO" "EVALUATE" model [WITH attrs] [LABEL ident] INTO ident ("." ident)*
               | "TO" ("EXPLAIN" | "RUN" | "MAXIMIZE" | "MINIMIZE") ...   refused: not built here
    columns   := ("COLUMN" expr ("," expr)* ["FOR" NAME])*     see runtime/column_spec.py
    model_def := NAME ("." NAME)*           a premade name (DNNClassifier) or zoo.module.Symbol
    attrs     := attr ("," attr)*
    attr      := NAME ("." NAME)* "=" value
    value     := ["-" | "+"] NUMBER | STRING | NAME ("." NAME)*
               | "[" [value ("," value)* [","]] "]" | "(" [value ("," value)* [","]] ")"
    model     := NAME ("." NAME)* | STRING       a name under the model root, or a quoted URL
    ident     := NAME | QUOTED_IDENT
    STRING    := '...' | "..."      a quote inside is doubled: 'it''s'
    QUOTED_IDENT := "..." | `...`   no quotes, control characters or line breaks inside

WITH values: integers and floats (`1e-3`), strings, `True`/`False`, `None`/`null` (any case),
lists, tuples (`(x)` is `x`, as in Python) and dotted names, kept as the string they spell.
Where each key goes (SQLFlow's `model.*`, `train.*`, `validation.*`, `optimizer.*` and the
older spellings) is attributes.py's table.

Names in the results (tables, label) are in *SQL form*: a bare identifier as written, a quoted
one with its quotes (`db."My Table"`); `lexer.split_identifier` gives the unquoted parts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from elasticdl.runtime.column_spec import ColumnGroup, ColumnParser
from elasticdl.runtime.sql.attributes import (
    ENGINE_KEYS,
    TRAIN_KEYS,
    WithClause,
    null_policy_problem,
    route,
    split_with,
    value_problem,
)
from elasticdl.runtime.sql.lexer import (
    StatementError,
    Tok,
    check_quoted_name,
    describe,
    quote_identifier,
    split_identifier,
    tokenize,
    unquote,
)
from elasticdl.runtime.sql.select_part import (
    ClauseStart,
    SelectColumn,
    SelectPart,
    clause_candidates,
    parse_select,
    select_with_columns,
    sqlglot_dialect,
)

__all__ = [
    "ENGINE_KEYS",
    "TRAIN_KEYS",
    "EvaluateStatement",
    "ModelRef",
    "PredictStatement",
    "SelectColumn",
    "Statement",
    "StatementError",
    "TrainStatement",
    "WithClause",
    "null_policy_problem",
    "parse_statement",
    "quote_identifier",
    "select_with_columns",
    "split_identifier",
    "split_with",
]

_CLAUSE_WORDS = {"WITH", "LABEL", "INTO", "USING", "COLUMN", "FOR"}
REFUSED_KINDS = {
    "EXPLAIN": "explaining a model (SHAP) is not built here",
    "RUN": "running a container image on the rows is not built here",
    "MAXIMIZE": "mathematical programming is not built here",
    "MINIMIZE": "mathematical programming is not built here",
}


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
    feature_columns: tuple[ColumnGroup, ...] = ()
    using: ModelRef | None = None  # TO TRAIN ... USING m: start from model m's parameters
    star: bool = False

    def split_with(self) -> WithClause:
        return split_with(self.attributes)


@dataclass(frozen=True)
class PredictStatement:
    select: str
    columns: tuple[SelectColumn, ...]
    tables: tuple[str, ...] | None
    result_table: str
    result_column: str
    using: ModelRef
    attributes: dict[str, Any] = field(default_factory=dict)
    star: bool = False

    def split_with(self) -> WithClause:
        return split_with(self.attributes)


@dataclass(frozen=True)
class EvaluateStatement:
    select: str
    columns: tuple[SelectColumn, ...]
    tables: tuple[str, ...] | None
    model: ModelRef
    attributes: dict[str, Any]
    label: str | None
    into: str  # the result table (SQL form)
    star: bool = False

    def split_with(self) -> WithClause:
        return split_with(self.attributes)


Statement = TrainStatement | PredictStatement | EvaluateStatement


class _Parser:
    """The clauses after the SELECT (grammar in the module docstring)."""

    def __init__(self, text: str, toks: list[Tok], i: int):
        self.text, self.toks, self.i = text, toks, i

    @property
    def tok(self) -> Tok:
        return self.toks[self.i]

    def fail(self, expected: str, tok: Tok | None = None) -> StatementError:
        tok = tok or self.tok
        return StatementError(f"expected {expected}, got {describe(tok)}", self.text, tok.pos)

    def name(self, what: str, quoted: bool = False, dotted: bool = True) -> list[str]:
        parts = []
        while True:
            tok = self.tok
            if tok.kind == "word" and tok.text.upper() not in _CLAUSE_WORDS:
                parts.append(tok.text)
            elif quoted and tok.kind == "quoted" and tok.text[0] in '"`':
                parts.append(check_quoted_name(tok, self.text))
            else:
                raise self.fail(what)
            self.i += 1
            if not (dotted and self.tok.op(".")):
                return parts
            self.i += 1

    def model(self, after: str) -> ModelRef:
        tok = self.tok
        if tok.kind == "quoted" and tok.text[0] in "'\"":
            value = unquote(tok)
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
            return unquote(tok)
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
                target = route(key)
            except StatementError as e:
                raise e.at(self.text, start.pos) from None
            problem = value_problem(target, attrs[key])
            if problem:
                raise StatementError(f"WITH {key}: {problem}", self.text, value_tok.pos)
            where = (target.section, target.name)
            if where in targets:
                raise StatementError(
                    f"WITH {targets[where]} and {key} both set {target.name}", self.text, start.pos
                )
            targets[where] = key
            if not self.tok.op(","):
                return attrs
            self.i += 1

    def with_clause(self) -> dict[str, Any]:
        if not self.tok.word("WITH"):
            return {}
        self.i += 1
        return self.attributes()

    def label(self) -> str | None:
        if not self.tok.word("LABEL"):
            return None
        self.i += 1
        return self.name("a column name after LABEL", quoted=True, dotted=False)[0]

    def train(self, select: SelectPart) -> TrainStatement:
        model_def = ".".join(
            self.name("a model definition after TRAIN (e.g. DNNClassifier or regressor.DNN)")
        )
        after = "WITH, COLUMN, LABEL or INTO <model> after the TRAIN clause"
        attrs = self.with_clause()
        if attrs:
            after = "',', COLUMN, LABEL or INTO <model> after the WITH clause"
        groups = ColumnParser(self.text, self.toks, self.i)
        feature_columns = groups.groups()
        self.i = groups.i
        if feature_columns:
            after = "',', COLUMN, FOR, LABEL or INTO <model> after the COLUMN clause"
        label = self.label()
        if label is not None:
            after = "USING or INTO <model> after the LABEL clause"
        using = None
        if self.tok.word("USING"):
            self.i += 1
            using = self.model("USING")
        if not self.tok.word("INTO"):
            raise self.fail(after)
        self.i += 1
        return TrainStatement(
            select=select.select,
            columns=select.columns,
            tables=select.tables,
            model_def=model_def,
            attributes=attrs,
            label=label,
            into=self.model("INTO"),
            feature_columns=feature_columns,
            using=using,
            star=select.star,
        )

    def predict(self, select: SelectPart) -> PredictStatement:
        start = self.tok
        parts = self.name("<table>.<column> after PREDICT", quoted=True)
        if len(parts) < 2:
            raise self.fail("'.' and a column: PREDICT <table>.<column>")
        target = self.text[start.pos : self.toks[self.i - 1].end]
        attrs = self.with_clause()
        if not self.tok.word("USING"):
            after = "the WITH clause" if attrs else f"PREDICT {target}"
            raise self.fail(f"USING <model> after {after}")
        self.i += 1
        return PredictStatement(
            select=select.select,
            columns=select.columns,
            tables=select.tables,
            result_table=".".join(parts[:-1]),
            result_column=parts[-1],
            using=self.model("USING"),
            attributes=attrs,
            star=select.star,
        )

    def evaluate(self, select: SelectPart) -> EvaluateStatement:
        model = self.model("EVALUATE")
        attrs = self.with_clause()
        label = self.label()
        if not self.tok.word("INTO"):
            raise self.fail("WITH, LABEL or INTO <result table> after the EVALUATE clause")
        self.i += 1
        into = ".".join(self.name("a result table after INTO", quoted=True))
        return EvaluateStatement(
            select=select.select,
            columns=select.columns,
            tables=select.tables,
            model=model,
            attributes=attrs,
            label=label,
            into=into,
            star=select.star,
        )

    def end(self) -> None:
        semicolon = self.tok.op(";")
        self.i += semicolon
        if self.tok.kind != "eof":
            why = "after ';': one statement at a time" if semicolon else "here: expected the end"
            raise StatementError(f"unexpected {describe(self.tok)} {why}", self.text, self.tok.pos)


def _clause(text: str, start: ClauseStart, select: SelectPart) -> Statement:
    if start.kind in REFUSED_KINDS:
        raise StatementError(
            f"TO {start.kind} is not supported: {REFUSED_KINDS[start.kind]}; this project runs "
            "TO TRAIN, TO PREDICT and TO EVALUATE",
            text,
            start.kind_pos,
        )
    parser = _Parser(text, tokenize(text, start.kind_end), 0)
    statement: Statement
    if start.kind == "TRAIN":
        statement = parser.train(select)
    elif start.kind == "PREDICT":
        statement = parser.predict(select)
    else:
        statement = parser.evaluate(select)
    parser.end()
    return statement


def _no_clause(text: str, dialect: str) -> StatementError:
    from elasticdl.runtime.sql.select_part import first_semicolon

    at = first_semicolon(text, dialect)
    found = "unexpected ';', " if at < len(text.rstrip()) else ""
    return StatementError(
        f"{found}expected a TO TRAIN, TO PREDICT or TO EVALUATE clause: SELECT ... TO TRAIN "
        "<model> [WITH k=v, ...] [COLUMN ...] [LABEL col] INTO <model>, SELECT ... TO PREDICT "
        "<table>.<column> USING <model>, or SELECT ... TO EVALUATE <model> [WITH ...] LABEL "
        "col INTO <table>",
        text,
        at,
    )


def parse_statement(text: str, dialect: str | None = None) -> Statement:
    """Parse one statement (module docstring). `dialect` is the database's: a URL or dialect
    name (sqlite, postgresql, mysql, mariadb); None reads the SELECT as generic SQL."""
    sql_dialect = sqlglot_dialect(dialect)
    candidates = clause_candidates(text, sql_dialect)
    if not candidates:
        from elasticdl.runtime.sql.select_part import unclosed_paren

        paren = unclosed_paren(text, sql_dialect)
        if paren is not None:
            raise StatementError("'(' is never closed", text, paren)
        raise _no_clause(text, sql_dialect)
    first_error: StatementError | None = None
    for start in candidates:
        try:
            select = parse_select(text, start.pos, sql_dialect)
        except StatementError as err:
            first_error = first_error or err
            continue
        try:
            return _clause(text, start, select)
        except StatementError as err:
            if start is candidates[-1] or err.message.startswith("TO "):
                raise
            first_error = err
    assert first_error is not None
    raise first_error
