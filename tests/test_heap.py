"""A server process freezes its start-up heap out of the garbage collector's full passes
(``relay_project.heap``), when it starts serving: the ASGI lifespan start-up here."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.live import manage, relay_env

ROOT = Path(__file__).resolve().parent.parent

STARTED = textwrap.dedent(
    """
    import asyncio, gc, os, weakref
    os.environ["DJANGO_SETTINGS_MODULE"] = "relay_project.settings"
    from relay_project import asgi

    before = gc.get_freeze_count()

    async def start():
        messages = [{"type": "lifespan.startup"}]
        answers = []
        async def receive():
            if messages:
                return messages.pop()
            await asyncio.sleep(3600)
        async def send(message):
            answers.append(message["type"])
            raise SystemExit  # the start-up is answered: enough
        try:
            await asgi.lifespan({"type": "lifespan"}, receive, send)
        except SystemExit:
            pass
        return answers

    answered = asyncio.run(start())
    frozen = gc.get_freeze_count()
    tracked = len(gc.get_objects())

    class Cycle:
        pass

    cycle = Cycle()
    cycle.itself = cycle
    alive = weakref.ref(cycle)
    del cycle
    gc.collect()
    collected = alive() is None
    print(answered, before, frozen, tracked, collected)
    """
)


def test_the_lifespan_start_up_freezes_the_heap_and_later_cycles_are_still_collected(tmp_path):
    env = relay_env(tmp_path)
    manage(env, "migrate", "--verbosity", "0")
    done = subprocess.run(
        [sys.executable, "-c", STARTED],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answered, before, frozen, tracked, collected = (
        done.stdout.strip().splitlines()[-1].rsplit(" ", 4)
    )
    assert answered == "['lifespan.startup.complete']"
    assert int(before) == 0, "nothing is frozen before the server starts"
    assert int(frozen) > 100_000, f"only {frozen} objects frozen at start-up"
    assert int(tracked) < int(frozen) // 10, (
        f"{tracked} objects left for full passes beside {frozen} frozen"
    )
    assert collected == "True", "a cycle made after the freeze is still collected"
