"""Usage and cost of calls (one record per task at its end: ``records``), quotas and budgets
checked before each call and each team hop (``quotas``), hourly roll-ups (``rollups``) and the
reports read from them (``reports``). docs/concepts/usage.md describes them."""
