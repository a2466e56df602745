"""Workflows: fixed multi-agent pipelines (``definition`` parses and validates the YAML,
``expressions`` renders step inputs and evaluates conditions, ``planner`` decides which steps
start next). These three modules are plain Python and import no Django."""
