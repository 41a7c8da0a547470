"""Submitting a Workflow to an Argo server with hera's `WorkflowsService`, and waiting for it.

    submitted = submit_workflow(workflow, "https://argo.example.com:2746", token, "argo")
    print(submitted.name, submitted.ui_url)       # <ui>/workflows/<namespace>/<name>
    phase = wait_for(submitted.name, "https://argo.example.com:2746", token, "argo")

Contract:

* `submit_workflow` POSTs ``{"workflow": {...}}`` to ``<server>/api/v1/workflows/<namespace>``
  with ``Authorization: Bearer <token>`` (none without a token; a token that already names
  its scheme, like the ``Bearer v2:...`` that ``argo auth token`` prints, is sent as it is).
  The server URL may have a path (a base href behind a proxy): ``https://host/argo``.
* Every failure is an `ArgoError` whose message is one line: `ArgoAuthError` (401/403),
  `ArgoNotFound` (404: namespace or server URL wrong), `ArgoConflict` (409: the name is
  taken), `ArgoRejected` (other 4xx, e.g. 400 when the server's validation refuses the
  workflow), `ArgoServerError` (5xx, with the message from the server's JSON body),
  `ArgoUnreachable` (connection refused, DNS, TLS, no answer in time), `ArgoWaitTimeout`.
  Redirects are not followed (requests would turn the POST into a GET): the error names the
  Location to use instead. Bad arguments (an URL without scheme, a namespace that is not a
  DNS label, a token with whitespace, a dict that is not a Workflow) raise ValueError.
* The token never appears in a message, an exception or a log line: messages are also
  scrubbed of it in case a server echoes it back, and exceptions do not chain the causes.
* `wait_for` polls ``GET <server>/api/v1/workflows/<namespace>/<name>`` with backoff (from
  `poll_s` up to `max_poll_s`), reports each phase change to `on_phase`, rides out a few
  consecutive transient failures (unreachable, 5xx, 404 right after creation), and returns
  the final phase (Succeeded, Failed or Error); `ArgoWaitTimeout` after `timeout_s`.
"""

from __future__ import annotations

import logging
import re
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests

log = logging.getLogger(__name__)

TERMINAL_PHASES = ("Succeeded", "Failed", "Error")
DEFAULT_TIMEOUT_S = 30.0
"""Seconds one request may take (connecting, then each read)."""
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")]+)")
_MESSAGE_CHARS = 400


class ArgoError(Exception):
    """A submission or status request failed; the message is one line, without the token.
    `status` is the HTTP status when the server answered (None otherwise)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ArgoAuthError(ArgoError):
    """401 or 403: no token, a token the server refused, or one without the permission."""


class ArgoNotFound(ArgoError):
    """404: the namespace does not exist or the server URL is not an Argo server's base URL
    (or, while waiting, the workflow is gone)."""


class ArgoConflict(ArgoError):
    """409: a workflow of that name already exists (a fixed name; use generateName)."""


class ArgoRejected(ArgoError):
    """Another 4xx: the server refused the request, e.g. its validation of the workflow."""


class ArgoServerError(ArgoError):
    """5xx: the Argo server (or the Kubernetes API behind it) failed."""


class ArgoUnreachable(ArgoError):
    """No HTTP answer: connection refused, unknown host, TLS failure, or no answer in time."""


class ArgoWaitTimeout(ArgoError):
    """`wait_for` gave up; the workflow goes on. `phase` is the last phase seen."""

    def __init__(self, message: str, phase: str | None) -> None:
        super().__init__(message)
        self.phase = phase


@dataclass(frozen=True)
class SubmittedWorkflow:
    """A workflow the Argo server accepted: its (generated) name, namespace, uid, UI link."""

    name: str
    namespace: str
    uid: str
    ui_url: str


def workflow_ui_url(ui: str, namespace: str, name: str) -> str:
    """The Argo UI page of one workflow: ``<ui>/workflows/<namespace>/<name>``."""
    return f"{ui.rstrip('/')}/workflows/{namespace}/{name}"


def check_namespace(namespace: str) -> str:
    """The namespace, if it is a DNS label (what Kubernetes accepts); ValueError otherwise."""
    if not isinstance(namespace, str) or len(namespace) > 63 or not _DNS_LABEL.match(namespace):
        raise ValueError(
            f"--namespace {namespace!r} is not a Kubernetes namespace name (lowercase letters, "
            "digits and '-', at most 63 characters)"
        )
    return namespace


def base_url(server: str, flag: str = "--argo_server") -> str:
    """`server` as a base URL ending in '/' (so API paths join under its path); ValueError
    naming `flag` when it is not an http(s) URL without credentials, query or fragment."""
    text = (server or "").strip()
    parts = urlsplit(text)
    shown = repr(text) if "@" not in text else "(a URL with '@')"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"{flag} {shown} is not an http(s) URL, e.g. https://argo.example.com:2746"
        )
    if parts.username or parts.password:
        raise ValueError(
            f"{flag} must not hold a user or password; give the token with --token or $ARGO_TOKEN"
        )
    if parts.query or parts.fragment:
        raise ValueError(f"{flag} {shown}: give the server's base URL, without ? or #")
    try:
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError:
        raise ValueError(f"{flag} {shown} has an invalid port") from None
    return text if text.endswith("/") else text + "/"


def _check_token(token: str | None) -> str | None:
    if token is None:
        return None
    token = token.strip()
    if not token:
        return None
    if any(ch.isspace() and ch != " " for ch in token) or any(ord(ch) < 32 for ch in token):
        raise ValueError("the token holds a line break or a control character; give it in one line")
    if len(token.split()) > 2:
        raise ValueError("the token holds spaces; give it as TOKEN or as 'Bearer TOKEN'")
    return token


def _scrub(text: str, token: str | None) -> str:
    """One line of at most a few hundred characters, without the token (nor its bare value)."""
    if token:
        for secret in {token, token.split()[-1]}:
            if len(secret) >= 4:
                text = text.replace(secret, "***")
    text = " ".join(text.split())
    if len(text) > _MESSAGE_CHARS:
        text = text[: _MESSAGE_CHARS - 3] + "..."
    return text


class _Session(requests.Session):
    """hera's requests go through this session: it adds a timeout (hera sets none), does not
    follow redirects, and keeps the last response, whose status and JSON `message` make our
    errors (hera's exceptions keep neither the status of the codes it does not map nor a
    body without `message`)."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__()
        self.timeout_s = timeout_s
        self.last_response: requests.Response | None = None

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> Any:
        kwargs["timeout"] = kwargs.get("timeout") or self.timeout_s
        kwargs["allow_redirects"] = False
        self.last_response = None
        response = super().request(method, url, *args, **kwargs)
        self.last_response = response
        return response


class ArgoClient:
    """One Argo server and namespace: `submit(workflow)` and `wait(name)`."""

    def __init__(
        self,
        server: str,
        token: str | None,
        namespace: str,
        *,
        verify_tls: bool | str = True,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        ui_url: str | None = None,
    ) -> None:
        from hera.workflows import WorkflowsService

        self.server = base_url(server)
        self.namespace = check_namespace(namespace)
        self.ui = base_url(ui_url, "--argo_ui_url") if ui_url else self.server
        self.timeout_s = timeout_s
        self._token = _check_token(token)
        self._session = _Session(timeout_s)
        self._service = WorkflowsService(
            host=self.server,
            token=self._token,
            namespace=self.namespace,
            verify_ssl=verify_tls,  # type: ignore[arg-type]  # requests takes a CA bundle too
            session=self._session,
        )

    def __repr__(self) -> str:
        return f"ArgoClient({self.display!r}, namespace={self.namespace!r})"

    @property
    def display(self) -> str:
        """The server URL as messages show it."""
        return self.server.rstrip("/")

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> ArgoClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def submit(self, workflow: Any) -> SubmittedWorkflow:
        """Create `workflow` (a hera Workflow or its dict); the server's name and uid for it."""
        from hera.workflows import models as m

        model = _workflow_model(workflow)
        meta = model.metadata
        if meta.namespace and meta.namespace != self.namespace:
            raise ValueError(
                f"the workflow's metadata.namespace {meta.namespace!r} is not the namespace it "
                f"is submitted to ({self.namespace!r})"
            )
        if not meta.name and not meta.generate_name:
            raise ValueError("the workflow has neither metadata.name nor metadata.generateName")
        request = m.WorkflowCreateRequest(workflow=model)
        answer = self._call(
            lambda: self._service.create_workflow(request, namespace=self.namespace),
            "create",
            meta.name,
        )
        metadata = answer.get("metadata") if isinstance(answer, dict) else None
        name = metadata.get("name") if isinstance(metadata, dict) else None
        if not isinstance(name, str) or not name:
            raise ArgoError(
                f"the server at {self.display} accepted the request but its answer names no "
                "workflow: is --argo_server the Argo server (not its UI behind a proxy)?"
            )
        return SubmittedWorkflow(
            name=name,
            namespace=str(metadata.get("namespace") or self.namespace),
            uid=str(metadata.get("uid") or ""),
            ui_url=workflow_ui_url(self.ui, self.namespace, name),
        )

    def status(self, name: str) -> tuple[str, str]:
        """(phase, message) of a workflow; phase "Pending" until the controller sets one."""
        if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
            raise ValueError(f"{name!r} is not a workflow name")
        answer = self._call(
            lambda: self._service.get_workflow(name, namespace=self.namespace), "get", name
        )
        status = answer.get("status") if isinstance(answer, dict) else None
        if not isinstance(status, dict):
            status = {}
        phase = status.get("phase") or "Pending"
        message = status.get("message") or ""
        return str(phase), _scrub(str(message), self._token)

    def wait(
        self,
        name: str,
        *,
        timeout_s: float,
        poll_s: float = 2.0,
        max_poll_s: float = 30.0,
        max_failures: int = 5,
        on_phase: Callable[[str, str], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> str:
        """Poll until the workflow ends; its final phase. See the module documentation."""
        deadline = clock() + timeout_s
        interval = poll_s
        last: str | None = None
        failures = 0
        while True:
            try:
                phase, message = self.status(name)
            except (ArgoUnreachable, ArgoServerError, ArgoNotFound) as err:
                failures += 1
                if failures >= max_failures:
                    raise
                log.warning("polling workflow %s: %s (will retry)", name, err)
            else:
                failures = 0
                if phase != last:
                    last = phase
                    interval = poll_s
                    if on_phase is not None:
                        on_phase(phase, message)
                if phase in TERMINAL_PHASES:
                    return phase
            remaining = deadline - clock()
            if remaining <= 0:
                raise ArgoWaitTimeout(
                    f"workflow {name} is still {last or 'not readable'} after {timeout_s:g}s; "
                    "stopped waiting (the workflow goes on)",
                    last,
                )
            sleep(min(interval, remaining))
            interval = min(interval * 1.5, max_poll_s)

    def _call(self, request: Callable[[], Any], action: str, name: str | None) -> Any:
        """Run one hera service call; the JSON answer (a dict), or a typed ArgoError."""
        error: ArgoError | None = None
        try:
            with warnings.catch_warnings():
                # hera serializes with pydantic's deprecated .json(); not the user's concern.
                warnings.simplefilter("ignore", DeprecationWarning)
                request()
        except requests.exceptions.Timeout:
            maybe = " (the workflow may have been created: look in the UI)"
            error = ArgoUnreachable(
                f"cannot reach the Argo server at {self.display}: no answer within "
                f"{self.timeout_s:g}s{maybe if action == 'create' else ''}"
            )
        except requests.exceptions.SSLError as err:
            error = ArgoUnreachable(
                f"cannot reach the Argo server at {self.display}: TLS failed: "
                f"{_scrub(_tls_reason(err), self._token)} (--insecure_skip_verify skips the "
                "check)"
            )
        except requests.exceptions.ConnectionError as err:
            error = ArgoUnreachable(
                f"cannot reach the Argo server at {self.display}: "
                f"{_scrub(_reason(err), self._token)}"
            )
        except Exception as err:  # hera's HeraException, pydantic, JSON, a body without message
            if self._session.last_response is None:
                error = ArgoError(
                    f"request to the Argo server at {self.display} failed: "
                    f"{type(err).__name__}: {_scrub(str(err), self._token)}"
                )
        if error is not None:
            raise error from None
        response = self._session.last_response
        assert response is not None
        if not response.ok or response.status_code >= 300:
            raise self._http_error(response, action, name) from None
        try:
            return response.json()
        except ValueError:
            raise ArgoError(
                f"the server at {self.display} answered HTTP {response.status_code} without "
                "JSON: is --argo_server the Argo server's base URL?",
                response.status_code,
            ) from None

    def _http_error(self, response: requests.Response, action: str, name: str | None) -> ArgoError:
        code = response.status_code
        message = _scrub(_server_message(response), self._token)
        where = f"namespace {self.namespace!r}"
        if 300 <= code < 400:
            location = _scrub(response.headers.get("Location", "?"), self._token)
            return ArgoError(
                f"the Argo server at {self.display} redirects (HTTP {code}) to {location}; give "
                "the URL it redirects to as --argo_server",
                code,
            )
        if code == 401:
            if self._token is None:
                return ArgoAuthError(
                    f"the Argo server asks for a token (HTTP 401: {message}); give --token or "
                    "set ARGO_TOKEN (e.g. from `argo auth token`)",
                    code,
                )
            return ArgoAuthError(f"the Argo server refused the token (HTTP 401): {message}", code)
        if code == 403:
            verb = "create workflows" if action == "create" else "read workflows"
            return ArgoAuthError(
                f"the Argo server refused the token (HTTP 403: not allowed to {verb} in {where}): "
                f"{message}",
                code,
            )
        if code == 404:
            if action == "get":
                return ArgoNotFound(
                    f"workflow {name} not found in {where} (HTTP 404): {message}", code
                )
            return ArgoNotFound(
                f"the Argo server at {self.display} answered 404 for "
                f"{urlsplit(response.url).path} ({message}): check that {where} exists and "
                "that --argo_server is the server's base URL",
                code,
            )
        if code == 409:
            what = f"a workflow named {name!r}" if name else "a workflow of that name"
            return ArgoConflict(
                f"{what} already exists in {where} (HTTP 409: {message}); use "
                "metadata.generateName (as `elasticdl render` does) or another name",
                code,
            )
        if code >= 500:
            return ArgoServerError(f"the Argo server failed (HTTP {code}): {message}", code)
        return ArgoRejected(
            f"the Argo server rejected the request (HTTP {code}): {message}",
            code,
        )


def _workflow_model(workflow: Any) -> Any:
    """hera's API model of a hera Workflow, or of a Workflow as a dict (ValueError if not)."""
    import pydantic
    from hera.workflows import Workflow as HeraWorkflow
    from hera.workflows import models as m

    if isinstance(workflow, HeraWorkflow):
        return workflow.build()
    if isinstance(workflow, m.Workflow):
        return workflow
    if not isinstance(workflow, Mapping):
        raise ValueError(f"expected a hera Workflow or a dict, got {type(workflow).__name__}")
    kind = workflow.get("kind", "Workflow")
    if kind != "Workflow":
        raise ValueError(f"expected a Workflow, got kind {kind!r}")
    try:
        return m.Workflow.model_validate(dict(workflow))
    except pydantic.ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise ValueError(f"not a valid Workflow: {where}: {first.get('msg')}") from None


def _server_message(response: requests.Response) -> str:
    """The `message` of the server's JSON error body, or its text, or the HTTP reason."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        for key in ("message", "error"):
            if isinstance(body.get(key), str) and body[key].strip():
                return body[key]
    text = response.text.strip() if isinstance(response.text, str) else ""
    if text and not text.lstrip().startswith("<"):
        return text
    return response.reason or "no message"


def _tls_reason(err: Exception) -> str:
    """The short cause of a TLS failure ("certificate verify failed: self-signed ...")."""
    found = re.search(r"(certificate verify failed: [^(\]'\"]+)", str(err))
    if found:
        return found.group(1).strip()
    found = re.search(r"\[SSL: ([A-Z_]+)\]", str(err))
    return found.group(1) if found else _reason(err)


def _reason(err: Exception) -> str:
    """The short cause of a connection failure ("Connection refused"), not urllib3's essay."""
    text = str(err)
    found = _ERRNO.search(text)
    if found:
        return found.group(1).strip().rstrip(".")
    for hint in ("Name or service not known", "nodename nor servname", "CERTIFICATE_VERIFY_FAILED"):
        if hint in text:
            return hint
    inner = text.rsplit("Caused by ", 1)[-1]
    return inner.strip("()' ") or type(err).__name__


def submit_workflow(
    workflow: Any,
    server: str,
    token: str | None,
    namespace: str,
    verify_tls: bool | str = True,
    *,
    ui_url: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> SubmittedWorkflow:
    """Create `workflow` (hera Workflow or dict) in `namespace` on the Argo server at
    `server`; the name the server gave it, its uid and its UI page (under `ui_url`, default
    `server`). ArgoError (typed, one line, no token) or ValueError; see the module docs."""
    with ArgoClient(
        server, token, namespace, verify_tls=verify_tls, timeout_s=timeout_s, ui_url=ui_url
    ) as client:
        return client.submit(workflow)


def print_phase(name: str) -> Callable[[str, str], None]:
    """An `on_phase` that prints ``NAME: PHASE`` (and the status message, if any) at once."""

    def report(phase: str, message: str) -> None:
        print(f"{name}: {phase}" + (f": {message}" if message else ""), flush=True)

    return report


def wait_for(
    name: str,
    server: str,
    token: str | None,
    namespace: str,
    verify_tls: bool | str = True,
    *,
    timeout_s: float,
    poll_s: float = 2.0,
    max_poll_s: float = 30.0,
    on_phase: Callable[[str, str], None] | None = None,
    request_timeout_s: float = DEFAULT_TIMEOUT_S,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """Poll workflow `name` until it ends; its final phase (Succeeded, Failed or Error).
    Phase changes go to `on_phase(phase, message)` (default: printed as ``NAME: PHASE``);
    ArgoWaitTimeout after `timeout_s`; other ArgoErrors once transient ones persist."""
    with ArgoClient(
        server, token, namespace, verify_tls=verify_tls, timeout_s=request_timeout_s
    ) as client:
        return client.wait(
            name,
            timeout_s=timeout_s,
            poll_s=poll_s,
            max_poll_s=max_poll_s,
            on_phase=on_phase if on_phase is not None else print_phase(name),
            sleep=sleep,
            clock=clock,
        )
