"""The live status ``make up`` shows in place of the processes' logs: whether the relay and
the worker are up, how many agents are healthy, how many requests the relay served.

Plain Python: the command gathers a ``Status`` (from its child processes, the database and the
relay's ``/metrics``) and hands it to a ``StatusBoard``, which decides what reaches the
console."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from prometheus_client.parser import text_string_to_metric_families

REQUESTS_SAMPLE = "relay_http_requests_total"


@dataclass(frozen=True)
class Status:
    relay_up: bool
    worker_up: bool | None  # None: started without a worker
    agents: int
    healthy: int
    requests: int | None  # None: the relay's /metrics could not be read


def status_line(status: Status) -> str:
    """One short line, e.g. ``relay up | worker up | agents healthy 4/4 | 12 requests``."""
    parts = [f"relay {'up' if status.relay_up else 'NOT ANSWERING'}"]
    if status.worker_up is not None:
        parts.append(f"worker {'up' if status.worker_up else 'STOPPED'}")
    parts.append(f"agents healthy {status.healthy}/{status.agents}")
    if status.requests is not None:
        parts.append(f"{status.requests} request{'' if status.requests == 1 else 's'} served")
    return " | ".join(parts)


def requests_served(metrics_text: str) -> int:
    """The requests the relay answered, from its Prometheus text: every route kind but
    ``metrics`` (the status's own scrapes)."""
    total = 0.0
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name == REQUESTS_SAMPLE and sample.labels.get("kind") != "metrics":
                total += sample.value
    return int(total)


class StatusBoard:
    """Puts the status on a console. A terminal gets one line rewritten in place; anything else
    (a pipe, a file) gets a new line when the processes or the agents' health change, and for a
    change in the request count alone at most every ``quiet_seconds``, so it never scrolls.
    ``say`` prints a message above the status line."""

    def __init__(
        self,
        *,
        write: Callable[[str], object],
        flush: Callable[[], object],
        interactive: bool,
        quiet_seconds: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.write, self.flush = write, flush
        self.interactive = interactive
        self.quiet_seconds = quiet_seconds
        self.clock = clock
        self.lock = threading.Lock()
        self.shown: Status | None = None
        self.shown_at = 0.0
        self.line = ""

    def show(self, status: Status) -> None:
        with self.lock:
            if status == self.shown:
                return
            if self.interactive:
                self.line = f"{time.strftime('%H:%M:%S')}  {status_line(status)}"
                self.write(f"\r\x1b[K{self.line}")
            else:
                requests_only = (
                    self.shown is not None
                    and replace(status, requests=self.shown.requests) == self.shown
                )
                if requests_only and self.clock() - self.shown_at < self.quiet_seconds:
                    return
                self.write(f"{time.strftime('%H:%M:%S')}  {status_line(status)}\n")
            self.flush()
            self.shown, self.shown_at = status, self.clock()

    def say(self, text: str) -> None:
        with self.lock:
            if self.interactive and self.line:
                self.write(f"\r\x1b[K{text}\n{self.line}")
            else:
                self.write(f"{text}\n")
            self.flush()
