"""The SELECT of a statement: where it ends, and what it selects, read by sqlglot.

A statement is `SELECT ... TO TRAIN ...`: standard SQL in the database's dialect, then the
extension clauses. The SELECT is whatever the database accepts (schema-qualified names such as
`iris.train`, quoted names, subqueries, joins, common table expressions, set operations), so it
is tokenized and parsed by sqlglot in the database's dialect instead of being scanned for
keywords: `iris.train` is a table, not the TRAIN clause.

Where it ends (`clause_candidates`): at a top-level `TO <KIND>` (TRAIN, PREDICT, EVALUATE and
the kinds SQLFlow has that this project refuses: EXPLAIN, RUN, MAXIMIZE, MINIMIZE), or at a bare
`TRAIN` / `PREDICT` (the design document's older form) — never after a dot, inside parentheses,
strings, quoted names or comments. The statement parser tries the candidates in order and takes
the first whose prefix sqlglot parses as one query and whose rest its own grammar accepts.

`SelectPart` is what the rest needs: the SELECT's text as written, its items with their output
names, whether it selects `*`, and the tables of a plain FROM (None for subqueries, CTEs and
set operations: its rows may not be a table's).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from elasticdl.runtime.sql.lexer import StatementError, tokenize

CLAUSE_KINDS = ("TRAIN", "PREDICT", "EVALUATE", "EXPLAIN", "RUN", "MAXIMIZE", "MINIMIZE")
LEGACY_KINDS = ("TRAIN", "PREDICT")
"""Kinds that may stand without TO (the design document's `SELECT ... TRAIN ...`)."""

_DIALECTS = {
    "sqlite": "sqlite",
    "postgresql": "postgres",
    "postgres": "postgres",
    "mysql": "mysql",
    "mariadb": "mysql",
}


def sqlglot_dialect(db_or_dialect: str | None) -> str:
    """sqlglot's dialect for a database URL (`postgresql+psycopg://...`) or dialect name;
    "" (sqlglot's generic SQL) when unknown or None."""
    if not db_or_dialect:
        return ""
    name = db_or_dialect.split(":", 1)[0].split("+", 1)[0].lower()
    return _DIALECTS.get(name, "")


@dataclass(frozen=True)
class SelectColumn:
    """One item of the SELECT list: its SQL, and its output name (unquoted) when known."""

    text: str
    name: str | None


@dataclass(frozen=True)
class SelectPart:
    """The SELECT of a statement (see the module docstring)."""

    select: str
    columns: tuple[SelectColumn, ...]
    tables: tuple[str, ...] | None
    star: bool = False


@dataclass(frozen=True)
class ClauseStart:
    """Where the extension may start: `pos` (the SELECT ends before it) and its kind word."""

    pos: int
    kind: str
    kind_pos: int
    kind_end: int
    with_to: bool


def _tokens(text: str, dialect: str) -> list[Any]:
    import sqlglot
    from sqlglot.errors import TokenError

    try:
        return sqlglot.tokenize(text, read=dialect or None)
    except TokenError as err:
        tokenize(text)  # the project's tokenizer says where a string or comment is unclosed
        raise StatementError(f"the statement cannot be read: {err}", text, 0) from None


def _is_word(token: Any) -> bool:
    from sqlglot.tokens import TokenType

    return token.token_type not in (TokenType.STRING, TokenType.IDENTIFIER, TokenType.NUMBER)


def clause_candidates(text: str, dialect: str) -> list[ClauseStart]:
    """Every place the SELECT may end, in order (see the module docstring)."""
    from sqlglot.tokens import TokenType

    tokens = _tokens(text, dialect)
    found: list[ClauseStart] = []
    depth = 0
    for k, token in enumerate(tokens):
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth = max(0, depth - 1)
        if depth or not _is_word(token) or token.text.upper() not in CLAUSE_KINDS:
            continue
        before = tokens[k - 1] if k else None
        if before is not None and before.token_type == TokenType.DOT:
            continue
        kind = token.text.upper()
        end = token.end + 1
        if before is not None and _is_word(before) and before.text.upper() == "TO":
            found.append(ClauseStart(before.start, kind, token.start, end, True))
        elif kind in LEGACY_KINDS:
            found.append(ClauseStart(token.start, kind, token.start, end, False))
    return found


def unclosed_paren(text: str, dialect: str) -> int | None:
    """The position of the first '(' that is never closed, or None."""
    from sqlglot.tokens import TokenType

    opens: list[int] = []
    for token in _tokens(text, dialect):
        if token.token_type == TokenType.L_PAREN:
            opens.append(token.start)
        elif token.token_type == TokenType.R_PAREN and opens:
            opens.pop()
    return opens[0] if opens else None


def parse_select(text: str, end: int, dialect: str) -> SelectPart:
    """The SELECT `text[:end]`, parsed; StatementError (with the position sqlglot gives) when
    it is not one query."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError

    select = text[:end].rstrip()
    tokens = _tokens(select, dialect)
    if not tokens:
        raise StatementError(
            "expected SELECT at the start of the statement (or WITH ... SELECT)", text, 0
        )
    first = tokens[0]
    try:
        trees = sqlglot.parse(select, read=dialect or None)
    except ParseError as err:
        problem = err.errors[0] if err.errors else {}
        pos = _offset(select, problem.get("line"), problem.get("col"))
        what = problem.get("description") or str(err).splitlines()[0]
        what = re.sub(r"<class '[\w.]*\.(\w+)'>", r"\1", what)
        raise StatementError(f"the SELECT does not parse: {what}", text, pos) from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise StatementError(
            "unexpected ';': one statement at a time", text, first_semicolon(select, dialect)
        )
    tree = trees[0]
    if not isinstance(tree, exp.Query):
        raise StatementError(
            f"expected SELECT at the start of the statement, got {first.text.upper()}",
            text,
            first.start,
        )
    columns, star = _columns(tree, dialect)
    return SelectPart(select[first.start :], columns, plain_tables(tree), star)


def _offset(text: str, line: int | None, col: int | None) -> int:
    if not line or not col:
        return len(text)
    start = 0
    for _ in range(line - 1):
        start = text.find("\n", start) + 1
    return min(start + col - 1, len(text))


def first_semicolon(text: str, dialect: str) -> int:
    from sqlglot.tokens import TokenType

    for token in _tokens(text, dialect):
        if token.token_type == TokenType.SEMICOLON:
            return token.start
    return len(text.rstrip())


def _main_select(tree: Any) -> Any:
    """The SELECT whose items name the output: the left-most one of a set operation."""
    from sqlglot import exp

    while isinstance(tree, exp.SetOperation):
        tree = tree.this
    while isinstance(tree, exp.Subquery):
        tree = tree.this
    return tree


def _columns(tree: Any, dialect: str) -> tuple[tuple[SelectColumn, ...], bool]:
    from sqlglot import exp

    main = _main_select(tree)
    columns, star = [], False
    for item in getattr(main, "expressions", []):
        is_star = isinstance(item, exp.Star) or (isinstance(item, exp.Column) and item.is_star)
        star = star or is_star
        named = isinstance(item, exp.Alias | exp.Column) and not is_star
        columns.append(
            SelectColumn(item.sql(dialect=dialect or None), item.alias_or_name if named else None)
        )
    return tuple(columns), star


def _sql_name(table: Any) -> str:
    parts = []
    for key in ("catalog", "db", "this"):
        ident = table.args.get(key)
        if ident is None:
            continue
        name = ident.name
        parts.append(f'"{name}"' if getattr(ident, "quoted", False) else name)
    return ".".join(parts)


def plain_tables(tree: Any) -> tuple[str, ...] | None:
    """The tables of a plain FROM list and its joins (aliases dropped), () without FROM, None
    for anything else."""
    from sqlglot import exp

    if not isinstance(tree, exp.Select) or tree.args.get("with_") or tree.args.get("with"):
        return None
    source = tree.args.get("from_") or tree.args.get("from")
    if source is None:
        return ()
    items = [source.this, *(join.this for join in tree.args.get("joins") or [])]
    if not all(
        isinstance(item, exp.Table) and isinstance(item.this, exp.Identifier) for item in items
    ):
        return None
    return tuple(_sql_name(item) for item in items)


def select_with_columns(select: str, items: Sequence[str], dialect: str = "") -> str:
    """`select` with `items` (SQL text, already quoted by the caller) appended to its column list
    (`dialect`: the database's URL or dialect name).

    Used to carry a table's key through a conversion the user did not ask for; refused
    (StatementError) where more columns would change the rows: DISTINCT, GROUP BY, HAVING, set
    operations, or no FROM.
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.tokens import TokenType

    dialect = sqlglot_dialect(dialect)
    tree = sqlglot.parse_one(select, read=dialect or None)
    if isinstance(tree, exp.SetOperation):
        raise StatementError(
            f"cannot add columns to a SELECT with {type(tree).__name__.upper()}: it would "
            "change its rows; select the key column yourself"
        )
    for key, word in (("distinct", "DISTINCT"), ("group", "GROUP BY"), ("having", "HAVING")):
        if tree.args.get(key):
            raise StatementError(
                f"cannot add columns to a SELECT with {word}: it would change its rows; select "
                "the key column yourself"
            )
    depth = 0
    for token in _tokens(select, dialect):
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and token.token_type == TokenType.FROM:
            head = select[: token.start].rstrip()
            return f"{head}, {', '.join(items)} {select[token.start :]}"
    raise StatementError("the SELECT has no FROM clause", select, len(select))
