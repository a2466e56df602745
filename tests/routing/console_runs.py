"""A command that starts processes (``manage.py run_relay``, ``make up``, daphne, Celery) run
as a person runs it in a terminal: in a process group of its own, its console read line by
line, stopped with Ctrl-C (SIGINT to the whole group) and killed if it does not stop."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import threading
import time
from contextlib import suppress
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
STOP_SECONDS = 30.0


class ConsoleRun:
    """``command`` (a list, or a string for ``bash -c``) started in ``cwd`` with ``env``;
    stdout and stderr together are the console."""

    def __init__(self, command: list[str] | str, *, env: dict[str, str], cwd: Path = ROOT):
        argv = ["bash", "-c", command] if isinstance(command, str) else command
        self.process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._unread: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self._unread.put(line)

    def _take(self) -> None:
        while not self._unread.empty():
            self.lines.append(self._unread.get_nowait())

    @property
    def output(self) -> str:
        self._take()
        return "".join(self.lines)

    def wait_for(self, pattern: str, *, seconds: float = 90.0) -> re.Match:
        """The first match of ``pattern`` (a regular expression) in the console; fails the
        test with the console's tail when the process exits or the time runs out first."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            found = re.search(pattern, self.output, re.MULTILINE)
            if found:
                return found
            if self.process.poll() is not None:
                time.sleep(0.2)  # the last lines may still be on their way
                if found := re.search(pattern, self.output, re.MULTILINE):
                    return found
                raise AssertionError(
                    f"exited ({self.process.returncode}) before {pattern!r}:\n{self.output[-4000:]}"
                )
            time.sleep(0.2)
        raise AssertionError(f"{pattern!r} not seen within {seconds} s:\n{self.output[-4000:]}")

    def type(self, line: str) -> None:
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def stop(self) -> str:
        """Ctrl-C; returns the whole console once the process has exited."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGINT)
                self.process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(STOP_SECONDS)
            except ProcessLookupError:
                pass
        # Whatever the group left behind (a child that ignored the signal) goes too.
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        time.sleep(0.2)
        return self.output

    def __enter__(self) -> ConsoleRun:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
