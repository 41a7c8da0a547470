"""Argo's schemas: the CRDs (as the API server enforces them) and Argo's published JSON Schema.

The package ships, gzipped, the `crd-openapiv3` schemas of Argo Workflows v4.1.2 and v3.7.18
for Workflow, WorkflowTemplate and CronWorkflow (`schemas/<version>/<plural>.openapiv3.json.gz`;
provenance in tests/data/argo-schemas/PROVENANCE.md). They are validated with jsonschema's
Draft 7 validator. Strict mode adds `additionalProperties: false` to every object schema that
has `properties` and is not `x-kubernetes-preserve-unknown-fields`, so a misspelled key is an
error instead of being dropped silently by the API server.

Beside them, `schemas/<version>/schema.json.gz` is Argo's published JSON Schema
(api/jsonschema/schema.json: the one Argo's IDE set-up points editors at), used as published
(`published_errors`). It is stricter than the CRDs in one way that matters: it declares every
IntOrString field (`retryStrategy.limit`, `backoff.factor`, a template's
`activeDeadlineSeconds`) a string, as the argo-workflows Python SDK's models do, so an integer
there is a red mark in an editor and an `ApiTypeError` in the SDK although the API server takes
it. Rendered objects write those fields as strings and pass both.
"""

from __future__ import annotations

import copy
import functools
import gzip
import json
import os
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_VERSIONS = {"4": "v4.1.2", "3.7": "v3.7.18"}
PLURALS = {
    "Workflow": "workflows",
    "WorkflowTemplate": "workflowtemplates",
    "CronWorkflow": "cronworkflows",
}
SCHEMA_DIR_ENV = "ELASTICDL_ARGO_SCHEMAS"
"""A directory laid out like the package's `schemas/` (files may be .json or .json.gz)."""


def default_schema_dir() -> Path:
    override = os.environ.get(SCHEMA_DIR_ENV)
    return Path(override) if override else Path(__file__).parent / "schemas"


def schema_version(argo_version: str) -> str:
    try:
        return SCHEMA_VERSIONS[argo_version]
    except KeyError:
        raise ValueError(
            f"--argo_version {argo_version!r}: expected one of {', '.join(SCHEMA_VERSIONS)}"
        ) from None


def load_schema(kind: str, argo_version: str, schema_dir: Path | None = None) -> dict[str, Any]:
    """The CRD's openAPIV3Schema for `kind` ("Workflow", ...) at `argo_version` ("4", "3.7")."""
    return copy.deepcopy(_load(kind, argo_version, str(schema_dir or default_schema_dir())))


@functools.lru_cache(maxsize=16)
def _load(kind: str, argo_version: str, schema_dir: str) -> dict[str, Any]:
    if kind not in PLURALS:
        raise ValueError(f"no Argo schema for kind {kind!r}; known: {', '.join(PLURALS)}")
    return _read(
        Path(schema_dir) / schema_version(argo_version) / f"{PLURALS[kind]}.openapiv3.json"
    )


PUBLISHED_FILE = "schema.json"
"""Argo's published JSON Schema (draft 2020-12), per version directory."""


def _read(path: Path) -> dict[str, Any]:
    """`path` as JSON, or `path.gz` gunzipped; FileNotFoundError naming both otherwise."""
    if path.exists():
        return json.loads(path.read_bytes())
    gz = path.with_name(path.name + ".gz")
    if gz.exists():
        return json.loads(gzip.decompress(gz.read_bytes()))
    raise FileNotFoundError(f"Argo schema {path} (or .gz) is missing; set {SCHEMA_DIR_ENV}")


@functools.lru_cache(maxsize=4)
def _published_validator(argo_version: str, schema_dir: str) -> Any:
    published = _read(Path(schema_dir) / schema_version(argo_version) / PUBLISHED_FILE)
    return {
        kind: jsonschema.Draft202012Validator(
            {
                "$schema": published["$schema"],
                "definitions": published["definitions"],
                "$ref": f"#/definitions/io.argoproj.workflow.v1alpha1.{kind}",
            }
        )
        for kind in PLURALS
    }


def published_errors(
    document: dict[str, Any], argo_version: str, *, schema_dir: Path | None = None
) -> list[str]:
    """One line per violation of Argo's published JSON Schema (as published: IntOrString
    fields must be strings), `path: message`; none for a kind it does not cover here."""
    validators = _published_validator(argo_version, str(schema_dir or default_schema_dir()))
    check = validators.get(str(document.get("kind")))
    if check is None:
        return []
    return _lines(check.iter_errors(document))


def _lines(errors: Any) -> list[str]:
    lines = []
    for error in sorted(errors, key=lambda e: list(map(str, e.path))):
        message = error.message
        if len(message) > 240:
            message = message[:240] + "..."
        lines.append(f"{json_path(error.absolute_path)}: {message}")
    return lines


def strict(schema: Any) -> Any:
    """A copy of `schema` where objects with `properties` refuse unknown keys."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: strict(value) for key, value in schema.items()}
    if (
        "properties" in schema
        and isinstance(schema["properties"], dict)
        and not schema.get("x-kubernetes-preserve-unknown-fields")
        and "additionalProperties" not in schema
    ):
        result["additionalProperties"] = False
    return result


@functools.lru_cache(maxsize=16)
def _validator(kind: str, argo_version: str, strict_mode: bool, schema_dir: str) -> Any:
    schema = _load(kind, argo_version, schema_dir)
    if strict_mode:
        schema = strict(schema)
    return jsonschema.Draft7Validator(schema)


def validator(
    kind: str, argo_version: str, *, strict_mode: bool = True, schema_dir: Path | None = None
) -> Any:
    """A cached Draft 7 validator for `kind` at `argo_version`."""
    return _validator(kind, argo_version, strict_mode, str(schema_dir or default_schema_dir()))


def json_path(parts: Any) -> str:
    """`spec.templates[1].container` from a jsonschema error path."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(root)"


def schema_errors(
    document: dict[str, Any],
    argo_version: str,
    *,
    strict_mode: bool = True,
    schema_dir: Path | None = None,
) -> list[str]:
    """One line per schema violation of an Argo object: `path: message`."""
    kind = document.get("kind")
    check = validator(str(kind), argo_version, strict_mode=strict_mode, schema_dir=schema_dir)
    return _lines(check.iter_errors(document))
