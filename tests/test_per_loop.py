"""What a relay process keeps per event loop, and the cache backend its requests share."""

from __future__ import annotations

import asyncio

from django.core.cache import caches

from relay_project.per_loop import PerLoop


def backends_of_two_requests() -> tuple[object, object]:
    """The cache backend objects two requests of a server see, each request a task of its
    own on a loop started in the calling context (as uvicorn and daphne run them)."""

    async def serve():
        async def request():
            return caches["default"]

        loop = asyncio.get_running_loop()
        return await asyncio.gather(loop.create_task(request()), loop.create_task(request()))

    return tuple(asyncio.run(serve()))


async def test_a_loop_has_one_object_of_its_own():
    made = PerLoop(object)
    assert made.peek() is None
    first = made.get()
    assert made.get() is first and made.peek() is first
    other = await asyncio.get_running_loop().run_in_executor(None, lambda: asyncio.run(_get(made)))
    assert other is not first


async def _get(made: PerLoop) -> object:
    return made.get()
