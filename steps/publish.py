"""Pipeline steps around a published model: `record`, `latest` and `image`.

    python -m elasticdl.steps.publish record --model URL [--image IMAGE] [--summary_file PATH]
    python -m elasticdl.steps.publish latest --output URL --model URL
    python -m elasticdl.steps.publish image [--image IMAGE] [--repository REPO --tag TAG]
        [--trained_model URL] --image_file PATH

* `record` (step `publish`): writes the job image (a pullable `repository@sha256:...`) into the
  TrainedModel's `docker_commit_id`, rewriting `trained_model.pb` atomically (a rename on a local
  disk; one object upload elsewhere), and writes a small JSON summary of the model for Argo to
  keep as an output parameter and artifact. Running it again is harmless.
* `latest` (step `update-latest`): points `OUTPUT/LATEST` at a finished model (the file holds
  its URL), only after checking the model is complete. Written atomically, like `record`.
* `image` (step `resolve-image`): the image a job runs in, written to a file Argo reads as an
  output parameter: `--image`; else, in the train pipeline, the image its build step pushes
  (`--repository`:`--tag`); else, in the predict pipeline, the TrainedModel's
  `docker_commit_id`. The step always runs, so later steps never read an output of the build
  step, which is skipped when --image is given.

Exit status 2 with one line on stderr for bad input (a missing or incomplete model...).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasticdl.runtime.trained_model import LATEST_FILE

log = logging.getLogger("elasticdl.steps.publish")


@dataclass
class PublishResult:
    model: str
    docker_commit_id: str
    summary: dict[str, Any] = field(default_factory=dict)
    succeeded: bool = True


def _fs(url: str) -> tuple[Any, str, bool]:
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    protocol = fs.protocol[0] if isinstance(fs.protocol, tuple | list) else fs.protocol
    return fs, path, protocol in ("file", "local")


def _absolute(url: str) -> str:
    if "://" in url:
        return url.rstrip("/")
    return str(Path(url).expanduser().resolve())


def write_atomically(url: str, data: bytes) -> None:
    """Replace the file at `url` so that readers see the old or the new content, never half."""
    fs, path, local = _fs(url)
    if local:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        temporary = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
        with open(temporary, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    else:
        fs.pipe_file(path, data)  # a single object upload is atomic on GCS and S3


def _read_pb(model: str) -> Any:
    """The TrainedModel at `model`; TrainedModelError (a ValueError) when it is not there."""
    from google.protobuf.message import DecodeError

    from elasticdl.proto import elasticdl_pb2 as pb
    from elasticdl.runtime.trained_model import TRAINED_MODEL_FILE, TrainedModelError

    if not model:
        raise TrainedModelError("--model is required: the output of a training job")
    fs, path, _ = _fs(model)
    try:
        raw = fs.cat_file(f"{path.rstrip('/')}/{TRAINED_MODEL_FILE}")
    except FileNotFoundError:
        raise TrainedModelError(
            f"{model!r} has no {TRAINED_MODEL_FILE}: it is not a finished model (a training "
            "job writes it last)"
        ) from None
    except OSError as err:
        raise TrainedModelError(f"{model!r}: cannot read {TRAINED_MODEL_FILE}: {err}") from err
    try:
        trained = pb.TrainedModel.FromString(raw)
    except DecodeError as err:
        raise TrainedModelError(f"{model!r}: {TRAINED_MODEL_FILE} is corrupt ({err})") from None
    if not trained.model_def:
        raise TrainedModelError(f"{model!r}: {TRAINED_MODEL_FILE} is not an ElasticDL model")
    return trained


def summary(model: str, trained: Any) -> dict[str, Any]:
    """What the summary artifact says about a published model."""
    return {
        "model": _absolute(model),
        "docker_commit_id": trained.docker_commit_id,
        "model_def": trained.model_def,
        "model_zoo": trained.model_zoo,
        "model_version": trained.model_version,
        "metrics": dict(sorted(trained.metrics.items())),
        "created_time": trained.created_time,
        "elasticdl_version": trained.elasticdl_version,
    }


def _write_local(path: str, text: str) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def run(model: str, image: str = "", summary_file: str = "") -> PublishResult:
    """Record `image` as the model's docker_commit_id (when given) and write the summary."""
    from elasticdl.runtime.trained_model import TRAINED_MODEL_FILE

    trained = _read_pb(model)
    if image and trained.docker_commit_id != image:
        if trained.docker_commit_id:
            log.info("docker_commit_id %s -> %s", trained.docker_commit_id, image)
        trained.docker_commit_id = image
        write_atomically(f"{model.rstrip('/')}/{TRAINED_MODEL_FILE}", trained.SerializeToString())
    facts = summary(model, trained)
    if summary_file:
        _write_local(summary_file, json.dumps(facts, indent=2, sort_keys=True) + "\n")
    return PublishResult(_absolute(model), trained.docker_commit_id, facts)


def latest_url(output: str) -> str:
    return f"{output.rstrip('/')}/{LATEST_FILE}"


def read_latest(pointer: str) -> str | None:
    """The model URL a LATEST pointer file names; None when the file does not exist."""
    fs, path, _ = _fs(pointer)
    try:
        text = fs.cat_file(path).decode("utf-8").strip()
    except FileNotFoundError:
        return None
    if not text:
        raise ValueError(f"{pointer!r} is empty; it should name a model (publish latest)")
    return text


def update_latest(output: str, model: str) -> PublishResult:
    """Point OUTPUT/LATEST at `model` once it is a complete model."""
    if not output:
        raise ValueError("--output is required: the directory holding runs/ and LATEST")
    trained = _read_pb(model)
    write_atomically(latest_url(output), (_absolute(model) + "\n").encode())
    log.info("%s -> %s", latest_url(output), _absolute(model))
    return PublishResult(_absolute(model), trained.docker_commit_id, summary(model, trained))


def resolve_image(
    trained_model: str = "",
    image: str = "",
    image_file: str = "",
    repository: str = "",
    tag: str = "",
) -> str:
    """`image`, else `repository:tag`, else the TrainedModel's docker_commit_id; written to
    `image_file` if given. ValueError (one line) when none of them is given."""
    if not image and repository:
        if not tag:
            raise ValueError("--repository needs --tag: the image is REPOSITORY:TAG")
        image = f"{repository}:{tag}"
    if not image and not trained_model:
        raise ValueError("give --image, --repository with --tag, or --trained_model")
    if not image:
        from elasticdl.runtime.trained_model import resolve_model_url

        trained = _read_pb(resolve_model_url(trained_model))
        image = trained.docker_commit_id
        if not image:
            raise ValueError(
                f"the TrainedModel at {trained_model!r} records no image (docker_commit_id): "
                "it was trained on the local engine; pass --image with an image that has its "
                "model zoo"
            )
    if image_file:
        _write_local(image_file, image)
    return image


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    record = sub.add_parser("record", help="record the job image in the TrainedModel")
    record.add_argument("--model", required=True, help="the model directory (URL)")
    record.add_argument("--image", default="", help="pullable image reference (repo@sha256:...)")
    record.add_argument("--summary_file", default="", help="write a JSON summary here")
    latest = sub.add_parser("latest", help="point OUTPUT/LATEST at a finished model")
    latest.add_argument("--output", required=True, help="the directory holding LATEST")
    latest.add_argument("--model", required=True, help="the finished model (URL)")
    image = sub.add_parser("image", help="the image a job runs in")
    image.add_argument("--image", default="", help="this image, when given")
    image.add_argument("--repository", default="", help="else REPOSITORY:TAG (a build's)")
    image.add_argument("--tag", default="", help="the tag of --repository's image")
    image.add_argument("--trained_model", default="", help="else the image this model records")
    image.add_argument("--image_file", default="", help="write the image reference here")


def run_from_args(args: argparse.Namespace) -> Any:
    if args.action == "record":
        return run(args.model, args.image, args.summary_file)
    if args.action == "latest":
        return update_latest(args.output, args.model)
    return resolve_image(args.trained_model, args.image, args.image_file, args.repository, args.tag)


def _finish(args: argparse.Namespace, result: Any) -> int:
    if args.action == "record":
        commit = result.docker_commit_id or "(none)"
        print(f"published {result.model} (docker_commit_id {commit})")
    elif args.action == "latest":
        print(f"{latest_url(args.output)} -> {result.model}")
    else:
        print(result)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from elasticdl.steps.step_main import BAD_INPUT, run_step

    return run_step(
        "elasticdl.steps.publish",
        lambda args: f"publish {args.action}",
        add_arguments,
        run_from_args,
        _finish,
        argv,
        failures={ValueError: BAD_INPUT},
    )


if __name__ == "__main__":
    sys.exit(main())
