"""Brass Relay: an A2A gateway and agent registry built on Django."""

from relay_project.celery import app as celery_app

__all__ = ["celery_app"]
