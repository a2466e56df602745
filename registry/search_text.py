"""How search words and facets are spelled in the registry's stored text, and the error of a
query that cannot be used. Pure: shared by the filters, the selectors and search by meaning."""

from __future__ import annotations


class InvalidQueryError(ValueError):
    """A filter value or cursor that cannot be used; the message says which and why."""


def words(text: str) -> list[str]:
    """The lower-cased words of a search."""
    return [word for word in text.lower().split() if word]


def facet(value: str) -> str:
    """How one value is stored in a facet column (lower case, between bars)."""
    return f"|{value.lower()}|"
