"""Metered agents for the usage tests: real a2a-sdk agents that answer with a task (an
artifact, then a completed status update) and report their tokens on that final status
update, with the relay's usage extension or as kagent does. Each speaks client-routing: its
final message names the recipient ``NEXT[slug]`` says (None: no decision)."""

from __future__ import annotations

from a2a.server.agent_execution import RequestContext
from a2a.server.tasks import TaskUpdater
from a2a.types import Part, TaskState

from registry.extensions import CLIENT_ROUTING_URI
from routing.demo.agents import AgentSpec, Skill, TaskExecutor, build_agent_app, text_message
from tasks_app.usage.extension import USAGE_URI

TOKENS = {"meter-a": (1200, 300), "meter-b": (5000, 1000)}
"""(input, output) tokens each agent reports for every call."""
NEXT: dict[str, str | None] = {"meter-a": None, "meter-b": None}


def usage_metadata(slug: str) -> dict:
    tokens_in, tokens_out = TOKENS[slug]
    if slug == "meter-b":  # as kagent's ADK agents put it on their final status update
        return {
            "kagent_usage_metadata": {
                "promptTokenCount": tokens_in,
                "candidatesTokenCount": tokens_out,
                "totalTokenCount": tokens_in + tokens_out,
            }
        }
    return {USAGE_URI: {"inputTokens": tokens_in, "outputTokens": tokens_out, "model": "m-1"}}


class Metered(TaskExecutor):
    def __init__(self, slug: str) -> None:
        self.slug = slug

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        await updater.start_work()
        text = f"{self.slug}: {context.get_user_input()[:40]}"
        await updater.add_artifact([Part(text=text)], name="answer", last_chunk=True)
        message = text_message(updater, text)
        recipient = NEXT.get(self.slug)
        if recipient is not None:
            message.metadata.update({CLIENT_ROUTING_URI: {"recipient": recipient}})
            message.extensions.append(CLIENT_ROUTING_URI)
        await updater.update_status(
            TaskState.TASK_STATE_COMPLETED, message=message, metadata=usage_metadata(self.slug)
        )


def metered_agent(slug: str):
    spec = AgentSpec(
        slug=slug,
        name=f"Metered {slug}",
        description="Answers and reports its tokens.",
        skills=(Skill(id=slug, name=slug, description="Metered answers.", tags=("metered",)),),
        make_executor=lambda: Metered(slug),
        client_routing=True,
    )
    return lambda base_url: build_agent_app(spec, base_url=base_url)
