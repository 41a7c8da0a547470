"""The database password of a pipeline step, from a Kubernetes Secret rather than the URL.

On Argo every parameter is stored in the workflow (the UI and the API show it), so a `--db`
URL never carries a password there: `--db_secret NAME:KEY` names a Secret, the steps that
connect get its key as the environment variable `PASSWORD_ENV` (a `secretKeyRef`), and
`database_url` puts it into the URL in the step's memory only (never printed or logged).
"""

from __future__ import annotations

from collections.abc import Mapping

from elasticdl.runtime.job_options import split_db_secret

PASSWORD_ENV = "ELASTICDL_DB_PASSWORD"
"""The environment variable a step reads the --db_secret password from."""


def has_password(url: str) -> bool:
    """Whether the SQLAlchemy URL holds a password (an unparsable URL: a ':' before '@')."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).password is not None
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: judge by its text
        credentials = url.partition("://")[2].rpartition("@")[0]
        return ":" in credentials


def password_refusal(url: str) -> str | None:
    """The one-line refusal of a --db URL with a password for Argo, or None."""
    if not url or not has_password(url):
        return None
    return (
        "--db holds a password, which Argo would store in the workflow (shown by its UI and "
        "API); give the URL without it and the password in a Kubernetes Secret: "
        "--db_secret NAME:KEY"
    )


def database_url(url: str, db_secret: str, environ: Mapping[str, str]) -> str:
    """The URL to connect with: `url` itself without --db_secret, else `url` with the password
    from `environ[PASSWORD_ENV]` (what the Secret's key gave the step). ValueError (one line,
    no password) when the key did not arrive or the URL has a password of its own."""
    if not db_secret:
        return url
    name, key = split_db_secret(db_secret)
    if has_password(url):
        raise ValueError("give the password either in --db or with --db_secret, not both")
    password = environ.get(PASSWORD_ENV)
    if not password:
        raise ValueError(
            f"--db_secret {db_secret}: ${PASSWORD_ENV} is empty; create the Secret in the "
            f"workflow's namespace: kubectl create secret generic {name} "
            f"--from-literal={key}=PASSWORD"
        )
    from sqlalchemy.engine import make_url

    return make_url(url).set(password=password).render_as_string(hide_password=False)
