"""`--sql` and `--db` in place of `--data` for `elasticdl evaluate` (train and predict run
their pipelines, whose `sql-to-recordio` step does this).

The query is converted first, into a temporary directory that lives as long as the job; the
job then reads the converted RecordIO (and its schema.json) as `--data`.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator


def check_data_source(data: str | None, sql: str, db: str) -> None:
    """Exactly one of --data and --sql (with --db)."""
    if sql and data:
        raise ValueError("give either --data or --sql (with --db), not both")
    if sql and not db:
        raise ValueError("--sql needs --db, the database URL (e.g. sqlite:///hr.db)")
    if db and not sql:
        raise ValueError("--db is for --sql; give the SELECT with --sql")
    if not sql and not data:
        raise ValueError("give --data (RecordIO files) or --sql with --db")


@contextlib.contextmanager
def converted(sql: str, db: str, label: str | None = None) -> Iterator[str]:
    """Convert the query's rows to RecordIO in a temporary directory; yield its path.

    `label` "" means the last selected column (as in SQL statements); None: no label (for
    prediction data).
    """
    from elasticdl.runtime.sql.convert import convert

    work = tempfile.mkdtemp(prefix="elasticdl-sql-input-")
    try:
        result = convert(
            db,
            sql,
            f"{work}/data",
            label=label or None,
            label_last=label is not None,
            internal=True,
        )
        yield result.output
    finally:
        shutil.rmtree(work, ignore_errors=True)
