"""Listing, then watching, the pods of one job: the Kubernetes manager's eyes.

`PodWatch.run()` (a thread's target) lists the job's pods (label selector) and hands the
listing to `on_list`, with what `expected()` answered just before the list was requested (pods
created by then that the listing lacks were deleted while nobody watched). It then watches from
the list's resourceVersion, handing every ADDED, MODIFIED and DELETED event to `on_event`, and
lists again every `resync_s`, after a 410 Gone and after a broken connection (with backoff),
until `stop()`. What the events mean is decided elsewhere (pod_states.PodTracker, through the
manager's callbacks).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client.rest import ApiException

from elasticdl.runtime.k8s.pod_states import CreationBackoff

log = logging.getLogger("elasticdl.k8s")

Pod = Mapping[str, Any]


class PodWatch:
    def __init__(
        self,
        api: Any,
        namespace: str,
        selector: str,
        expected: Callable[[], list[str]],
        on_list: Callable[[list[Pod], list[str]], None],
        on_event: Callable[[str, Pod], None],
        backoff: Callable[[], CreationBackoff],
        resync_s: float,
        watch_timeout_s: int,
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._selector = selector
        self._expected = expected
        self._on_list = on_list
        self._on_event = on_event
        self._backoff = backoff
        self._resync_s = resync_s
        self._timeout_s = watch_timeout_s
        self._stopping = False
        self._stream: Any = None
        self.ready = threading.Event()
        """Set once the first listing was handed over."""

    def stop(self) -> None:
        self._stopping = True
        stream = self._stream
        if stream is not None:
            stream.stop()

    def run(self) -> None:
        failures = self._backoff()
        while not self._stopping:
            try:
                version = self._resync()
                failures.reset()
                self.ready.set()
                listed_at = time.monotonic()
                while not self._stopping and time.monotonic() - listed_at < self._resync_s:
                    version = self._watch_from(version)
                    if version is None:
                        break  # 410 Gone: list again
            except Exception as err:  # noqa: BLE001 - keep watching whatever happens
                if self._stopping:
                    return
                delay = failures.next_delay() or 5.0
                log.warning("watching pods failed (%s); listing again in %.1f s", err, delay)
                time.sleep(min(delay, 5.0))

    def _resync(self) -> str:
        """List the job's pods for `on_list`; returns the list's resourceVersion."""
        expected = self._expected()
        resp = self._api.list_namespaced_pod(
            self._namespace, label_selector=self._selector, _preload_content=False
        )
        listing = json.loads(resp.data)
        self._on_list(listing.get("items") or [], expected)
        return str((listing.get("metadata") or {}).get("resourceVersion") or "")

    def _watch_from(self, version: str) -> str | None:
        """One watch request from `version`; the last resourceVersion seen, None on 410."""
        from kubernetes import watch

        stream = watch.Watch()
        self._stream = stream
        try:
            for event in stream.stream(
                self._api.list_namespaced_pod,
                self._namespace,
                label_selector=self._selector,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=self._timeout_s,
                _request_timeout=self._timeout_s + 15,
                deserialize=False,
            ):
                kind = event.get("type")
                obj = event.get("object") or {}
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self._on_event(kind, obj)
                if self._stopping:
                    break
        except ApiException as err:
            if err.status == 410:
                return None
            raise
        return version
