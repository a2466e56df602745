"""Real A2A agents for the demo and for tests, built on the official a2a-sdk server.

No Django in this package (a2a-sdk, Starlette and, to run servers, uvicorn only):

- `routing.demo.agents`: `AgentSpec`, `build_agent_app`, `app_factory`, the demo agents
  `TRIAGE`, `RESEARCHER`, `WRITER`, `ECHO` (`DEMO_AGENTS`) and `serve_demo_agents`.
- `routing.demo.serve`: `serve` / `serve_many` run ASGI apps in background threads.

Run the demo team: `python -m routing.demo --port 9301` (triage on 9301, researcher
9302, writer 9303, echo 9304). Nothing is imported here so that `-m` runs cleanly.
"""
