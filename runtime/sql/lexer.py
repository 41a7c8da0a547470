"""The project's own tokens for what follows a statement's SELECT, and SQL names.

The SELECT itself is the database's language and is tokenized and parsed by sqlglot in the
database's dialect (`select_part.py`); the extension clauses (`TO TRAIN ... WITH ... COLUMN ...
LABEL ... INTO`) have one grammar on every database, tokenized here: words, numbers, quoted
tokens (`'...'` strings, `"..."` strings or names, `` `...` `` names; a quote inside is
doubled, a backslash is an ordinary character, as in standard SQL), operators, and comments
(`-- ...`, `/* ... */`) anywhere.

`StatementError` is every statement error: the message, and with the text the line and a caret
under the offending position. `split_identifier` / `quote_identifier` validate a SQL name (bare
or quoted parts joined by dots) before it goes anywhere near a database.
"""

from __future__ import annotations

from dataclasses import dataclass

QUOTES = "'\"`"
_DIALECT_QUOTES = {"sqlite": '"', "postgresql": '"', "postgres": '"', "mysql": "`", "mariadb": "`"}


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
class Tok:
    kind: str  # word, number, quoted, op, eof
    text: str
    pos: int
    end: int

    def word(self, *words: str) -> bool:
        return self.kind == "word" and self.text.upper() in words

    def op(self, *ops: str) -> bool:
        return self.kind == "op" and self.text in ops


def tokenize(text: str, start: int = 0) -> list[Tok]:
    """The tokens of `text[start:]` (positions in `text`), ending with an `eof` token."""
    toks, i, n = [], start, len(text)
    while i < n:
        c, first = text[i], i
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
        if c in QUOTES:
            i += 1
            while True:
                i = text.find(c, i)
                if i < 0:
                    what = "string" if c == "'" else f"quoted name or string ({c}...{c})"
                    raise StatementError(f"unterminated {what} starting here", text, first)
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
        toks.append(Tok(kind, text[first:i], first, i))
    end = toks[-1].end if toks else n
    toks.append(Tok("eof", "", end, end))
    return toks


def unquote(tok: Tok) -> str:
    q = tok.text[0]
    return tok.text[1:-1].replace(q + q, q)


def check_quoted_name(tok: Tok, text: str) -> str:
    """A quoted name token's text, refused (StatementError) when empty or holding quotes,
    control characters or line breaks: nothing that could close the quote in another
    dialect."""
    inner = tok.text[1:-1]
    bad = [c for c in inner if c in QUOTES or ord(c) < 32 or ord(c) == 127]
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
    toks, parts, pos = tokenize(name), [], 0
    for k, tok in enumerate(toks[:-1]):
        ok = tok.op(".") if k % 2 else tok.kind == "word" or tok.text[0] in '"`'
        if tok.pos != pos or not ok:
            raise StatementError(f"invalid SQL name {name!r}", name, pos)
        if not k % 2:
            parts.append(tok.text if tok.kind == "word" else check_quoted_name(tok, name)[1:-1])
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


def bare_name(name: str) -> str:
    """The last part of a SQL name, unquoted: `t."My Col"` -> `My Col`."""
    return split_identifier(name)[-1]


def describe(tok: Tok) -> str:
    return "the end of the statement" if tok.kind == "eof" else repr(tok.text)
