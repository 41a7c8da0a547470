"""The submission contract: `--engine argo` against a loopback Argo server.

A `http.server` on 127.0.0.1 (port 0) records each request and answers per scenario; the
tests drive the CLI functions (`submit_train` / `submit_predict` with flags parsed by the
commands' own argument definitions) and `submit_workflow` / `wait_for` directly.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from elasticdl import argo_engine
from elasticdl.argo_engine import (
    add_argo_arguments,
    argo_only_flags,
    submit_predict,
    submit_train,
)
from elasticdl.predict_command import add_inference_arguments
from elasticdl.train_command import add_train_arguments
from elasticdl.workflows.render import render_objects
from elasticdl.workflows.submit import (
    ArgoAuthError,
    ArgoConflict,
    ArgoError,
    ArgoNotFound,
    ArgoRejected,
    ArgoServerError,
    ArgoUnreachable,
    ArgoWaitTimeout,
    submit_workflow,
    wait_for,
)

TOKEN = "s3cr3t-T0KEN-value"
IMAGE = "gcr.io/p/zoo@sha256:" + "c" * 64
TRAIN_FLAGS = [
    "--model_def=regressor.DNN",
    "--data=gs://b/train/*.recordio",
    "--output=gs://b/models/m",
    f"--image={IMAGE}",
    "--num_workers=3",
    "--params=hidden_units=[10, 20], lr=0.1",
]
PREDICT_FLAGS = [
    "--data=gs://b/test/*.recordio",
    "--trained_model=gs://b/models/m",
    "--output=gs://b/predictions/p",
    "--minibatch_size=128",
]
Reply = tuple[int, Any]


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeArgo:
    """The recorded requests; `reply(method, path, body)` -> (status, JSON or text)."""

    url: str
    reply: Callable[[str, str, Any], Reply]
    requests: list[Request] = field(default_factory=list)

    def workflow_body(self) -> dict[str, Any]:
        (post,) = [r for r in self.requests if r.method == "POST"]
        return post.body


def created(name: str = "elasticdl-train-x7k2p") -> Callable[[str, str, Any], Reply]:
    """Argo's answer to a create: the workflow with its generated name and a uid."""

    def reply(method: str, path: str, body: Any) -> Reply:
        workflow = dict(body["workflow"])
        workflow["metadata"] = {**workflow["metadata"], "name": name, "uid": "u-1"}
        return 200, workflow

    return reply


def with_phases(name: str, phases: list[str], message: str = "") -> Callable[..., Reply]:
    """Create, then answer the status requests with `phases` (the last one repeats)."""
    create = created(name)
    left = list(phases)

    def reply(method: str, path: str, body: Any) -> Reply:
        if method == "POST":
            return create(method, path, body)
        phase = left.pop(0) if len(left) > 1 else left[0]
        status: dict[str, Any] = {"phase": phase} if phase else {}
        if message and phase in ("Failed", "Error"):
            status["message"] = message
        return 200, {"metadata": {"name": name}, "spec": {}, "status": status}

    return reply


@contextlib.contextmanager
def serve(tls: ssl.SSLContext | None = None) -> Iterator[FakeArgo]:
    """A fake Argo server on 127.0.0.1 (any free port), answering with `fake.reply`."""
    fake: FakeArgo

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            fake.requests.append(Request(self.command, self.path, dict(self.headers), body))
            status, answer = fake.reply(self.command, self.path, body)
            data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
            self.send_response(status)
            if status in (301, 302, 307, 308):
                self.send_header("Location", "https://argo.example.com/")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except BrokenPipeError:  # the client gave up (the timeout test)
                pass

        do_GET = do_POST = _handle

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    scheme = "https" if tls else "http"
    fake = FakeArgo(f"{scheme}://127.0.0.1:{server.server_port}", created())
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # A proxy from the environment must not intercept the loopback requests.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ARGO_TOKEN", raising=False)
    monkeypatch.setattr(argo_engine, "POLL_S", 0.01)
    monkeypatch.setattr(argo_engine, "MAX_POLL_S", 0.02)


@pytest.fixture
def argo() -> Iterator[FakeArgo]:
    with serve() as fake:
        yield fake


def parse(job: str, *argv: str) -> argparse.Namespace:
    """The flags as `elasticdl train|predict` parses them: the job's arguments plus ours."""
    parser = argparse.ArgumentParser(prog=f"elasticdl {job}")
    if job == "train":
        add_train_arguments(parser)
    else:
        add_inference_arguments(parser, "predict")
    add_argo_arguments(parser, job)
    add_argo_arguments(parser, job)  # a second call is a no-op
    return parser.parse_args(list(argv))


def run(capsys: pytest.CaptureFixture[str], job: str, *argv: str) -> tuple[int, str, str]:
    status = (submit_train if job == "train" else submit_predict)(parse(job, *argv))
    out, err = capsys.readouterr()
    return status, out, err


def params_of(workflow: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p["value"] for p in workflow["spec"]["arguments"]["parameters"]}


def test_train_posts_the_rendered_workflow_with_the_bearer_token(argo, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    status, out, err = run(
        capsys, "train", *TRAIN_FLAGS, f"--argo_server={argo.url}", f"--token={TOKEN}"
    )
    assert (status, err) == (0, "")
    assert out.splitlines() == [
        "workflow elasticdl-train-x7k2p submitted to namespace argo",
        f"{argo.url}/workflows/argo/elasticdl-train-x7k2p",
    ]
    (post,) = argo.requests
    assert (post.method, post.path) == ("POST", "/api/v1/workflows/argo")
    assert post.headers["Authorization"] == f"Bearer {TOKEN}"
    assert post.headers["Content-Type"] == "application/json"
    assert list(post.body) == ["workflow"]
    workflow = post.body["workflow"]
    assert workflow["kind"] == "Workflow"
    assert workflow["metadata"]["generateName"] == "elasticdl-train-"
    assert workflow["metadata"]["namespace"] == "argo" and "name" not in workflow["metadata"]
    params = params_of(workflow)
    assert params["model_def"] == "regressor.DNN"
    assert params["data"] == "gs://b/train/*.recordio"
    assert params["num_workers"] == "3" and params["image"] == IMAGE
    assert params["params"] == "hidden_units=[10, 20], lr=0.1"
    # Exactly what `elasticdl render train` prints for the same values.
    from elasticdl.workflows.argo import ArgoOptions

    values = dict(f[2:].split("=", 1) for f in TRAIN_FLAGS)
    (rendered,) = render_objects("train", values, options=ArgoOptions(namespace="argo"))
    assert workflow == rendered
    assert TOKEN not in out + err + caplog.text


def test_predict_with_namespace_ui_url_env_token_and_job_name(argo, capsys, monkeypatch):
    argo.reply = created("nightly-abcde")
    monkeypatch.setenv("ARGO_TOKEN", "Bearer v2:" + TOKEN)  # as `argo auth token` prints it
    status, out, err = run(
        capsys,
        "predict",
        *PREDICT_FLAGS,
        f"--argo_server={argo.url}/",
        "--namespace=ml-jobs",
        "--argo_ui_url=https://ui.example.com/argo/",
        "--job_name=nightly",
    )
    assert (status, err) == (0, "")
    assert out.splitlines()[-1] == "https://ui.example.com/argo/workflows/ml-jobs/nightly-abcde"
    (post,) = argo.requests
    assert post.path == "/api/v1/workflows/ml-jobs"
    assert post.headers["Authorization"] == "Bearer v2:" + TOKEN
    workflow = post.body["workflow"]
    assert workflow["metadata"]["generateName"] == "nightly-"
    assert workflow["metadata"]["namespace"] == "ml-jobs"
    params = params_of(workflow)
    assert params["trained_model"] == "gs://b/models/m" and params["minibatch_size"] == "128"


def test_server_url_with_a_path_and_no_token(argo, capsys):
    status, out, _ = run(capsys, "train", *TRAIN_FLAGS, f"--argo_server={argo.url}/argo")
    assert status == 0
    (post,) = argo.requests
    assert post.path == "/argo/api/v1/workflows/argo"
    assert "Authorization" not in post.headers
    assert out.splitlines()[-1] == f"{argo.url}/argo/workflows/argo/elasticdl-train-x7k2p"


@pytest.mark.parametrize(
    ("code", "body", "expected"),
    [
        (401, {"code": 16, "message": "token not valid"}, "refused the token (HTTP 401): token "),
        (403, {"message": "forbidden"}, "refused the token (HTTP 403: not allowed to create"),
        (404, {"message": 'namespaces "argo" not found'}, "check that namespace 'argo' exists"),
        (409, {"message": "already exists"}, "use metadata.generateName"),
        (500, {"code": 13, "message": "etcdserver: request timed out"}, "the Argo server failed"),
        (502, b"<html>Bad Gateway</html>", "the Argo server failed (HTTP 502): Bad Gateway"),
        (400, {"message": "spec.templates[0] invalid"}, "rejected the request (HTTP 400): spec."),
        (302, {}, "redirects (HTTP 302) to https://argo.example.com/"),
    ],
)
def test_cli_errors_are_one_line_exit_2(argo, capsys, code, body, expected):
    argo.reply = lambda *_: (code, body)
    status, out, err = run(
        capsys, "train", *TRAIN_FLAGS, f"--argo_server={argo.url}", f"--token={TOKEN}"
    )
    assert (status, out) == (2, "")
    assert err.startswith("elasticdl train: error: ") and expected in err
    assert err.count("\n") == 1 and TOKEN not in err
    if code == 500:
        assert err.strip().endswith("(HTTP 500): etcdserver: request timed out")


def test_401_without_token_says_how_to_give_one(argo, capsys):
    argo.reply = lambda *_: (401, {"message": "token not valid"})
    status, _, err = run(capsys, "train", *TRAIN_FLAGS, f"--argo_server={argo.url}")
    assert status == 2 and "asks for a token" in err and "ARGO_TOKEN" in err


def test_server_down(capsys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    status, out, err = run(
        capsys, "train", *TRAIN_FLAGS, f"--argo_server={url}", f"--token={TOKEN}"
    )
    assert (status, out) == (2, "")
    reason = f"cannot reach the Argo server at {url}: Connection refused"
    assert err == f"elasticdl train: error: {reason}\n"


@pytest.mark.parametrize(
    ("phases", "message", "code", "final"),
    [
        (["", "Pending", "Running", "Running", "Succeeded"], "", 0, "Succeeded"),
        (["Running", "Failed"], "child 'train' failed", 1, "Failed"),
        (["Running", "Error"], "", 1, "Error"),
    ],
)
def test_wait_prints_phase_changes(argo, capsys, phases, message, code, final):
    name = "elasticdl-train-w1"
    argo.reply = with_phases(name, phases, message)
    status, out, err = run(
        capsys, "train", *TRAIN_FLAGS, f"--argo_server={argo.url}", f"--token={TOKEN}", "--wait"
    )
    assert status == code
    lines = out.splitlines()
    assert lines[0] == f"workflow {name} submitted to namespace argo"
    changes = [p or "Pending" for i, p in enumerate(phases) if i == 0 or p != phases[i - 1]]
    changes = [p for i, p in enumerate(changes) if i == 0 or p != changes[i - 1]]
    expected = [f"{name}: {p}" for p in changes]
    if message:
        expected[-1] += f": {message}"
    assert lines[2:] == expected
    gets = [r for r in argo.requests if r.method == "GET"]
    assert {r.path for r in gets} == {f"/api/v1/workflows/argo/{name}"}
    assert all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in gets)
    if code:
        assert err.startswith(f"elasticdl train: workflow {name} {final}")
        assert f"{argo.url}/workflows/argo/{name}" in err
    else:
        assert err == ""


def test_wait_timeout_exit_1(argo, capsys):
    argo.reply = with_phases("elasticdl-train-slow", ["Running"])
    status, out, err = run(
        capsys,
        "train",
        *TRAIN_FLAGS,
        f"--argo_server={argo.url}",
        "--wait",
        "--wait_timeout=0.2",
    )
    assert status == 1 and out.splitlines()[-1] == "elasticdl-train-slow: Running"
    assert "still Running after 0.2s; stopped waiting" in err


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--loss=mse", "--chaos=worker1:kill@tasks=1"], "--loss, --chaos: not parameter(s)"),
        ([], "needs --argo_server"),
        (["--namespace=Bad_NS"], "not a Kubernetes namespace name"),
        (["--job_name=My Job"], "--job_name 'My Job'"),
        (["--master_cpu=two"], "--master_cpu 'two' is not a Kubernetes quantity"),
        (["--image="], "give --image (a built job image) or --zoo_context"),
        (["--token=a\nb"], "line break"),
        (["--data=", "--sql=SELECT 1", "--db=sqlite:///x.db", "--label=y"], "needs --work_dir"),
    ],
)
def test_bad_input_exit_2_before_any_request(argo, capsys, flags, expected):
    server = [] if flags == [] else [f"--argo_server={argo.url}"]
    status, out, err = run(capsys, "train", *TRAIN_FLAGS, *server, *flags)
    assert (status, out) == (2, "")
    assert expected in err and err.count("\n") == 1
    assert argo.requests == []


def test_sql_input_reaches_the_pipeline(argo, capsys):
    status, _, err = run(
        capsys,
        "train",
        *TRAIN_FLAGS,
        "--data=",
        "--sql=SELECT * FROM employee",
        "--db=postgresql+psycopg://u:pw@db/hr",
        "--label=salary",
        "--work_dir=gs://b/work",
        f"--argo_server={argo.url}",
    )
    assert status == 2 and "--db_secret NAME:KEY" in err and "pw" not in err
    assert err.count("\n") == 1 and argo.requests == []
    status, _, err = run(
        capsys,
        "train",
        *TRAIN_FLAGS,
        "--data=",
        "--sql=SELECT * FROM employee",
        "--db=postgresql+psycopg://u@db/hr",
        "--db_secret=hr-db:password",
        "--label=salary",
        "--work_dir=gs://b/work",
        f"--argo_server={argo.url}",
    )
    assert status == 0, err
    params = params_of(argo.workflow_body()["workflow"])
    assert params["db_secret"] == "hr-db:password"
    assert params["sql"] == "SELECT * FROM employee" and params["label"] == "salary"
    assert params["data"] == "" and params["work_dir"] == "gs://b/work"


def test_argo_only_flags_for_the_local_engine():
    args = parse("train", *TRAIN_FLAGS, "--wait", "--namespace=argo")
    assert argo_only_flags(args, "train") == ["--wait", "--image"]
    assert argo_only_flags(parse("predict", *PREDICT_FLAGS), "predict") == []


def test_engine_argo_runs_workers_as_pods_with_the_kubernetes_flags(argo, capsys):
    flags = [
        "--worker_resource_request=cpu=2,memory=8Gi,gpu=1",
        "--node_selector=cloud.google.com/gke-nodepool=gpu",
        "--tolerations=nvidia.com/gpu:NoSchedule",
        "--pod_service_account=reader",
    ]
    status, _, err = run(capsys, "train", *TRAIN_FLAGS, *flags, f"--argo_server={argo.url}")
    assert (status, err) == (0, "")
    params = params_of(argo.workflow_body()["workflow"])
    assert params["instance_manager"] == "kubernetes"
    assert params["worker_resource_request"] == "cpu=2,memory=8Gi,gpu=1"
    assert params["tolerations"] == "nvidia.com/gpu:NoSchedule"
    assert params["pod_service_account"] == "reader"
    # Checked before anything is sent, like the master would: one line naming the flag.
    status, _, err = run(
        capsys, "train", *TRAIN_FLAGS, "--node_selector=gpu", f"--argo_server={argo.url}"
    )
    assert status == 2 and "--node_selector 'gpu'" in err and len(err.strip().splitlines()) == 1
    # The local engine has no use for them: they are Argo-only flags, which it refuses.
    args = parse("predict", *PREDICT_FLAGS, "--worker_resource_limit=cpu=2")
    assert argo_only_flags(args, "predict") == ["--worker_resource_limit"]


def test_token_echoed_by_the_server_is_scrubbed(argo, capsys):
    argo.reply = lambda *_: (401, {"message": f"token {TOKEN} expired"})
    status, _, err = run(
        capsys, "train", *TRAIN_FLAGS, f"--argo_server={argo.url}", f"--token={TOKEN}"
    )
    assert status == 2 and "token *** expired" in err and TOKEN not in err


# -- submit_workflow and wait_for directly -------------------------------------------------


def _workflow() -> dict[str, Any]:
    values = dict(f[2:].split("=", 1) for f in TRAIN_FLAGS)
    return render_objects("train", values)[0]


def test_submit_workflow_returns_name_uid_and_ui_url(argo):
    submitted = submit_workflow(_workflow(), argo.url, TOKEN, "team-a")
    assert submitted.name == "elasticdl-train-x7k2p" and submitted.uid == "u-1"
    assert submitted.namespace == "team-a"
    assert submitted.ui_url == f"{argo.url}/workflows/team-a/elasticdl-train-x7k2p"
    (post,) = argo.requests
    assert post.path == "/api/v1/workflows/team-a"
    assert post.body == {"workflow": _workflow()}


def test_submit_a_hera_workflow(argo):
    from hera.workflows import Container, Workflow

    with Workflow(generate_name="hello-", entrypoint="main") as workflow:
        Container(name="main", image="busybox", command=["true"])
    submit_workflow(workflow, argo.url, None, "argo")
    body = argo.workflow_body()["workflow"]
    assert body["metadata"] == {"generateName": "hello-"}
    assert body["spec"]["templates"][0]["container"]["image"] == "busybox"


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (401, ArgoAuthError),
        (403, ArgoAuthError),
        (404, ArgoNotFound),
        (409, ArgoConflict),
        (422, ArgoRejected),
        (500, ArgoServerError),
        (503, ArgoServerError),
    ],
)
def test_typed_errors_without_the_token(argo, code, error):
    argo.reply = lambda *_: (code, {"message": f"nope ({TOKEN})"})
    workflow = {**_workflow(), "metadata": {"name": "fixed-name"}}
    with pytest.raises(error) as caught:
        submit_workflow(workflow, argo.url, TOKEN, "argo")
    assert caught.value.status == code
    text = str(caught.value)
    assert TOKEN not in text and TOKEN not in repr(caught.value) and "\n" not in text
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    if code == 409:
        assert text.startswith("a workflow named 'fixed-name' already exists in namespace")


def test_unreachable_and_slow_servers(argo):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ArgoUnreachable, match="Connection refused"):
        submit_workflow(_workflow(), f"http://127.0.0.1:{port}", TOKEN, "argo")

    def slow(*_: Any) -> Reply:
        time.sleep(1.0)
        return 200, {}

    argo.reply = slow
    with pytest.raises(ArgoUnreachable, match=r"no answer within 0\.2s \(the workflow may"):
        submit_workflow(_workflow(), argo.url, TOKEN, "argo", timeout_s=0.2)


def test_answers_that_are_not_argo(argo):
    argo.reply = lambda *_: (200, b"<html>the UI</html>")
    with pytest.raises(ArgoError, match="without JSON"):
        submit_workflow(_workflow(), argo.url, None, "argo")
    argo.reply = lambda *_: (200, {"items": []})
    with pytest.raises(ArgoError, match="names no workflow"):
        submit_workflow(_workflow(), argo.url, None, "argo")


@pytest.mark.parametrize(
    ("server", "namespace", "workflow", "expected"),
    [
        ("argo.example.com:2746", "argo", None, "is not an http"),
        ("https://u:pw@argo.example.com", "argo", None, "must not hold a user or password"),
        ("http://127.0.0.1:1", "../x", None, "not a Kubernetes namespace name"),
        ("http://127.0.0.1:1", "argo", {"kind": "WorkflowTemplate"}, "got kind"),
        ("http://127.0.0.1:1", "b", {"metadata": {"namespace": "a"}, "spec": {}}, "not the"),
        ("http://127.0.0.1:1", "argo", {"metadata": {}, "spec": {}}, "neither metadata.name"),
    ],
)
def test_bad_arguments_are_value_errors(server, namespace, workflow, expected):
    with pytest.raises(ValueError, match=expected) as caught:
        submit_workflow(workflow or _workflow(), server, TOKEN, namespace)
    assert "pw" not in str(caught.value)


def test_wait_for_backs_off_and_rides_out_transient_failures(argo):
    name = "wf-1"
    answers: list[Reply] = [
        (503, {"message": "busy"}),
        (200, {"metadata": {"name": name}, "spec": {}, "status": {"phase": "Running"}}),
        (500, {"message": "oops"}),
        (200, {"metadata": {"name": name}, "spec": {}, "status": {"phase": "Running"}}),
        (200, {"metadata": {"name": name}, "spec": {}, "status": {"phase": "Succeeded"}}),
    ]
    argo.reply = lambda *_: answers.pop(0)
    seen: list[tuple[str, str]] = []
    sleeps: list[float] = []
    phase = wait_for(
        name,
        argo.url,
        TOKEN,
        "argo",
        timeout_s=60,
        poll_s=1.0,
        max_poll_s=2.0,
        on_phase=lambda p, m: seen.append((p, m)),
        sleep=sleeps.append,
    )
    assert phase == "Succeeded" and seen == [("Running", ""), ("Succeeded", "")]
    assert sleeps == [1.0, 1.0, 1.5, 2.0]  # reset on a phase change, then x1.5 up to the cap
    assert all(r.path == f"/api/v1/workflows/argo/{name}" for r in argo.requests)


def test_wait_for_gives_up_on_auth_errors_and_on_time(argo):
    argo.reply = lambda *_: (401, {"message": "token expired"})
    with pytest.raises(ArgoAuthError):
        wait_for("wf-1", argo.url, TOKEN, "argo", timeout_s=60, sleep=lambda _: None)
    argo.reply = lambda *_: (500, {"message": "down"})
    with pytest.raises(ArgoServerError):
        wait_for("wf-1", argo.url, TOKEN, "argo", timeout_s=60, sleep=lambda _: None)
    assert len(argo.requests) == 1 + 5
    argo.reply = lambda *_: (200, {"metadata": {"name": "wf-1"}, "spec": {}, "status": {}})
    now = [0.0]
    with pytest.raises(ArgoWaitTimeout, match="still Pending after 10s") as caught:
        wait_for(
            "wf-1",
            argo.url,
            None,
            "argo",
            timeout_s=10,
            on_phase=lambda *_: None,
            sleep=lambda s: now.__setitem__(0, now[0] + s),
            clock=lambda: now[0],
        )
    assert caught.value.phase == "Pending"


def _self_signed(directory: Any) -> tuple[str, str]:
    """A certificate for 127.0.0.1 signed by its own key: (cert.pem, key.pem)."""
    x509 = pytest.importorskip("cryptography.x509")
    import datetime
    import ipaddress

    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_file), str(key_file)


def test_tls_self_signed_certificate(tmp_path, capsys):
    cert, key = _self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    with serve(context) as fake:
        with pytest.raises(ArgoUnreachable, match="TLS failed: certificate verify failed") as e:
            submit_workflow(_workflow(), fake.url, TOKEN, "argo")
        assert "--insecure_skip_verify" in str(e.value) and TOKEN not in str(e.value)
        assert submit_workflow(_workflow(), fake.url, TOKEN, "argo", verify_tls=cert).uid == "u-1"
        with pytest.warns(Warning):  # urllib3's InsecureRequestWarning
            status, out, err = run(
                capsys, "train", *TRAIN_FLAGS, f"--argo_server={fake.url}", "--insecure_skip_verify"
            )
        assert (status, err) == (0, "") and out.startswith("workflow elasticdl-train-x7k2p")
        assert [r.method for r in fake.requests] == ["POST", "POST"]


def test_sql_statements_submit_their_pipelines(argo, capsys):
    from elasticdl.cli import main

    status = main(
        [
            "sql",
            "SELECT name, role, salary FROM employee TRAIN regressor.DNN WITH "
            "hidden_units=[10, 100, 20, 5], learning_rate=0.01, train.epoch=3, "
            "engine.num_workers=4 INTO my_trained_model;",
            "--db=sqlite:////data/hr.db",
            "--model_root=gs://b/models",
            "--engine=argo",
            f"--argo_server={argo.url}",
            "--image=reg.io/job:1",
            "--work_dir=gs://b/work",
        ]
    )
    assert status == 0, capsys.readouterr().err
    params = params_of(argo.workflow_body()["workflow"])
    assert params["sql"] == "SELECT name, role, salary FROM employee"
    assert params["label"] == "salary" and params["output"] == "gs://b/models/my_trained_model"
    assert params["params"] == "hidden_units=[10, 100, 20, 5], learning_rate=0.01"
    assert params["num_epochs"] == "3" and params["num_workers"] == "4"
    argo.requests.clear()
    status = main(
        [
            "sql",
            "SELECT name, role FROM testdata PREDICT testdata.predicted_salary "
            "USING my_trained_model;",
            "--db=sqlite:////data/hr.db",
            "--model_root=gs://b/models",
            "--key=name",
            "--engine=argo",
            f"--argo_server={argo.url}",
            "--work_dir=gs://b/work",
        ]
    )
    assert status == 0, capsys.readouterr().err
    params = params_of(argo.workflow_body()["workflow"])
    assert params["trained_model"] == "gs://b/models/my_trained_model"
    assert params["output_table"] == "testdata" and params["result_column"] == "predicted_salary"
    assert params["key"] == "name" and params["sql"] == "SELECT name, role FROM testdata"
    argo.requests.clear()
    status = main(
        [
            "sql",
            "SELECT * FROM iris.train TO TRAIN DNNClassifier WITH model.n_classes = 3, "
            'validation.select="SELECT * FROM iris.test" COLUMN sepal_length, petal_length '
            "LABEL class INTO sqlflow_models.my_dnn_model;",
            "--db=mysql+pymysql://root@db:3306/",
            "--model_root=gs://b/models",
            "--engine=argo",
            f"--argo_server={argo.url}",
            "--image=reg.io/job:1",
            "--work_dir=gs://b/work",
        ]
    )
    assert status == 0, capsys.readouterr().err
    params = params_of(argo.workflow_body()["workflow"])
    assert params["model_def"] == "DNNClassifier" and params["versioned"] == "true"
    assert params["feature_columns"] == "COLUMN sepal_length, petal_length"
    assert params["validation_sql"] == "SELECT * FROM iris.test"
    assert params["output"] == "gs://b/models/sqlflow_models/my_dnn_model"
    argo.requests.clear()
    status = main(
        [
            "sql",
            "SELECT * FROM iris.test TO EVALUATE sqlflow_models.my_dnn_model WITH "
            'validation.metrics="Accuracy,AUC" LABEL class INTO iris.evaluation;',
            "--db=mysql+pymysql://root@db:3306/",
            "--model_root=gs://b/models",
            "--engine=argo",
            f"--argo_server={argo.url}",
            "--work_dir=gs://b/work",
        ]
    )
    assert status == 0, capsys.readouterr().err
    workflow = argo.workflow_body()["workflow"]
    assert workflow["metadata"]["generateName"] == "elasticdl-evaluate-"
    params = params_of(workflow)
    assert params["eval_metrics"] == "Accuracy,AUC" and params["output_table"] == "iris.evaluation"
    argo.requests.clear()
    statement = "SELECT a, b FROM t TRAIN regressor.DNN INTO m;"
    db = ["--db=postgresql+psycopg://alice:s3cret@h/hr", "--model_root=gs://b/models"]
    argo_flags = ["--engine=argo", f"--argo_server={argo.url}", "--work_dir=gs://b/work"]
    status = main(["sql", statement, *db, *argo_flags, "--image=reg.io/job:1"])
    err = capsys.readouterr().err
    assert status == 2 and "--db_secret NAME:KEY" in err and "s3cret" not in err
    assert argo.requests == []
    with pytest.raises(SystemExit):  # unknown flags are an argparse error without argo
        main(["sql", "SELECT 1", "--db=sqlite://", "--bogus"])


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--service_account=sa{{workflow.name}}"], "contains '{{'"),
        (["--service_account=Not_A_Name"], "is not a ServiceAccount name"),
        (["--namespace=ns{{workflow.name}}"], "is not a Kubernetes namespace name"),
    ],
)
def test_submit_checks_the_service_account_and_namespace(argo, capsys, flags, expected):
    status, out, err = run(capsys, "train", *TRAIN_FLAGS, f"--argo_server={argo.url}", *flags)
    assert (status, out) == (2, "") and expected in err and err.count("\n") == 1
    assert argo.requests == []
