"""AG-UI endpoints for every agent, team and workflow (issue 38): ``inputs`` reads a run,
``events`` turns the A2A stream into AG-UI events, ``consumer`` serves them."""
