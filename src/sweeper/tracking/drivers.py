"""The database driver a tracking store URI needs, checked before anything opens it.

MLflow opens a database store (`postgresql://`, `mysql://`, `mssql://`) through
SQLAlchemy, which imports the URI's DBAPI driver only when it makes the engine: a
missing driver would surface as a ModuleNotFoundError traceback from `mlflow server`'s
start-up or from the first client call. `check_driver` asks SQLAlchemy for the dialect
it would load for the URI and imports that dialect's driver now, so the driver is
SQLAlchemy's own choice, never a table kept here: SQLAlchemy 2.1 loads psycopg 3 for a
plain `postgresql://` (what the `server` extra installs, and what docker/Dockerfile
installs through it) and psycopg2 for `postgresql+psycopg2://`. A missing driver is
`DriverMissing`, whose one-line message names the install command.

Only for database URIs: SQLite is in the standard library, and a tracking server or a
file store needs no driver here (the server holds its own, checked where `sweeper
cluster up` starts one). The check imports SQLAlchemy, so it costs nothing on the
SQLite path, which never imports it.
"""

from __future__ import annotations

from urllib.parse import urlparse

from sweeper.redact import redact

DATABASE_DIALECTS = frozenset({"postgresql", "mysql", "mssql", "postgres"})
"""The databases besides SQLite that MLflow's SQL store supports (`dialect[+driver]://`),
and `postgres`, a scheme other tools accept that SQLAlchemy does not: told, not left to
MLflow's traceback."""
EXTRA_DRIVER = "psycopg"
"""The driver module the `server` extra installs (pyproject.toml; psycopg[binary])."""
INSTALL_EXTRA = "pip install 'sweeper[server]' (in a checkout: make install)"
PIP_NAMES = {"psycopg2": "psycopg2-binary", "MySQLdb": "mysqlclient"}
"""A driver module's pip package where the two names differ."""


class DriverMissing(Exception):
    """SQLAlchemy cannot load the driver of a database URI; the one-line message says
    which module is missing and how to install it."""


def is_database(uri: str) -> bool:
    """A `dialect[+driver]://` URI of a database other than SQLite."""
    scheme = urlparse(uri).scheme.lower()
    return scheme.partition("+")[0] in DATABASE_DIALECTS


def check_driver(uri: str) -> None:
    """Raise DriverMissing unless SQLAlchemy can import the driver `uri` names (or the
    default driver of its dialect); anything but a database URI passes untouched."""
    if not is_database(uri):
        return
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    scheme = urlparse(uri).scheme
    shown = redact(uri)
    try:
        dialect = make_url(uri).get_dialect()
    except NoSuchModuleError:
        raise DriverMissing(
            f"no database driver for {shown}: SQLAlchemy knows no {scheme!r}; write the URI "
            f"as postgresql://USER:PASSWORD@HOST:PORT/DB and {INSTALL_EXTRA}"
        ) from None
    except ArgumentError:
        return  # not a URL SQLAlchemy parses: MLflow reports it with its own words
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        module = getattr(exc, "name", None) or dialect.driver
        raise DriverMissing(_missing(shown, scheme, module, exc)) from None


def _missing(shown: str, scheme: str, module: str, exc: ImportError) -> str:
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    head = f"the database driver for {shown} is missing ({scheme}: {reason})"
    if module == EXTRA_DRIVER:
        return f"{head}; install it: {INSTALL_EXTRA}"
    fix = f"pip install {PIP_NAMES.get(module, module)}"
    if scheme.partition("+")[0] == "postgresql":
        return f"{head}; install it ({fix}), or write postgresql://... and {INSTALL_EXTRA}"
    return f"{head}; install it: {fix}"
