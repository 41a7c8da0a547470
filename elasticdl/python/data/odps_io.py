"""ElasticDL v0.2's `elasticdl.python.data.odps_io`, without ODPS.

MaxCompute (ODPS) tables are not supported by this project: `is_odps_configured()` tells a
model file whether the ODPS environment is set (it is False unless MAXCOMPUTE_PROJECT,
MAXCOMPUTE_AK and MAXCOMPUTE_SK are all set), and `ODPSReader` / `ODPSWriter` raise one clear
error when created, so a model file that checks `is_odps_configured()` first runs unchanged.
"""

from __future__ import annotations

import os
from typing import Any

from elasticdl.python.common.constants import MaxComputeConfig

_UNSUPPORTED = (
    "{what}: MaxCompute (ODPS) tables are not supported by this ElasticDL; write to RecordIO "
    "(the prediction output parts) or to a SQL table (`elasticdl sql ... PREDICT`) instead, "
    "and unset {env} so is_odps_configured() is False"
)


def is_odps_configured() -> bool:
    """True when the MaxCompute project, access id and access key are all in the environment."""
    names = (MaxComputeConfig.PROJECT_NAME, MaxComputeConfig.ACCESS_ID, MaxComputeConfig.ACCESS_KEY)
    return all(os.environ.get(name) for name in names)


class ODPSUnsupportedError(NotImplementedError):
    """ODPS was asked for; this project has no ODPS client."""


def _refuse(what: str) -> ODPSUnsupportedError:
    env = ", ".join((MaxComputeConfig.PROJECT_NAME, MaxComputeConfig.ACCESS_ID))
    return ODPSUnsupportedError(_UNSUPPORTED.format(what=what, env=env))


class ODPSWriter:
    """Refuses to be created: ODPS is not supported."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise _refuse("ODPSWriter")


class ODPSReader:
    """Refuses to be created: ODPS is not supported."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise _refuse("ODPSReader")


__all__ = ["ODPSReader", "ODPSUnsupportedError", "ODPSWriter", "is_odps_configured"]
