"""The agent list's filters, each declared once: its query parameter, its type and description
(the API docs read them from here), how a bad value is refused, and what it matches.

Search and filters match the lower-cased text and "|"-delimited facet columns written with each
card, so every list runs a fixed number of queries on one table (plus two prefetches), and a
page costs about the same with 100 agents as with 10,000.

A bad value raises :class:`InvalidQueryError` with a message that names the parameter, e.g.
"streaming must be true or false, not 'maybe'"; empty values and unknown parameters are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Case, IntegerField, QuerySet, Value, When
from django.utils.dateparse import parse_datetime

from registry import semantic
from registry.models import Agent
from registry.search_text import InvalidQueryError, facet, words

# Form fields raise their message without the parameter's name; agent_filter puts it in front.
# The annotation ``ask=`` puts on each agent: its place by relevance (0 is the best).
ASK_RANK = "ask_rank"
_TRUTH = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


class _StrictBooleanField(forms.Field):
    """true/1/yes or false/0/no in any case; empty is no filter; anything else is refused
    (Django's NullBooleanField would read it as "no filter")."""

    def to_python(self, value):
        if value in (None, ""):
            return None
        if str(value).lower() not in _TRUTH:
            raise ValidationError("must be true or false, not %(value)r", params={"value": value})
        return _TRUTH[str(value).lower()]


class _ZonedDateTimeField(forms.Field):
    def to_python(self, value):
        if value in (None, ""):
            return None
        try:
            moment = parse_datetime(value)
        except ValueError:
            moment = None
        if moment is None or moment.tzinfo is None:
            raise ValidationError("must be an ISO 8601 time with a zone, e.g. 2026-01-01T00:00:00Z")
        return moment


class StrictBooleanFilter(django_filters.BooleanFilter):
    field_class = _StrictBooleanField


class ZonedDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = _ZonedDateTimeField


class FacetFilter(django_filters.CharFilter):
    """Matches one value of a "|"-delimited facet column, case-insensitively unless
    ``keep_case`` (extension URIs are compared as written)."""

    def __init__(self, *args, keep_case: bool = False, **kwargs) -> None:
        self.keep_case = keep_case
        kwargs.setdefault("strip", False)
        super().__init__(*args, lookup_expr="contains", **kwargs)

    def filter(self, queryset, value):
        if not value:
            return queryset
        return super().filter(queryset, f"|{value}|" if self.keep_case else facet(value))


def _choice(choices) -> django_filters.ChoiceFilter:
    values = ", ".join(value for value, _label in choices)
    return django_filters.ChoiceFilter(
        choices=choices,
        error_messages={"invalid_choice": f"must be one of {values}, not %(value)r"},
        help_text=f"One of {values}",
    )


class AgentFilterSet(django_filters.FilterSet):
    q = django_filters.CharFilter(
        method="filter_words",
        help_text="Words to find in name, description, skill names, descriptions and tags "
        "(every word must occur)",
    )
    ask = django_filters.CharFilter(
        method="filter_ask",
        help_text="A question in plain words: only agents with one of the 100 skills closest "
        "to it in meaning (by words, BM25, when the embedding model is unavailable). "
        "The list is then ordered by relevance, best first, on one page of `limit` agents.",
    )
    skill = FacetFilter(field_name="skill_facets", help_text="A skill id")
    tag = FacetFilter(field_name="tag_facets", help_text="A skill tag")
    extension = FacetFilter(
        field_name="extension_facets",
        keep_case=True,
        help_text="An extension URI the agent declares",
    )
    streaming = StrictBooleanFilter(help_text="true or false (also 1/0, yes/no)")
    pushNotifications = StrictBooleanFilter(
        field_name="push_notifications", help_text="true or false (also 1/0, yes/no)"
    )
    inputMode = FacetFilter(
        field_name="input_mode_facets", help_text="A media type the agent accepts, e.g. text/plain"
    )
    outputMode = FacetFilter(
        field_name="output_mode_facets", help_text="A media type the agent produces"
    )
    status = _choice(Agent.Status.choices)
    health = _choice(Agent.Health.choices)
    signed = StrictBooleanFilter(
        method="filter_signed",
        help_text="true: agents whose card carries a signature that verified; false: the others",
    )
    mirrored = StrictBooleanFilter(
        method="filter_mirrored",
        help_text="true: agents mirrored from a peer relay; false: agents registered here",
    )
    updatedSince = ZonedDateTimeFilter(
        field_name="updated_at",
        lookup_expr="gte",
        help_text="Agents whose card or settings changed at or after this ISO 8601 time with "
        "a zone, e.g. 2026-01-01T00:00:00Z",
    )

    class Meta:
        model = Agent
        fields: list[str] = []

    def filter_signed(self, queryset, name, value):
        if value is None:
            return queryset
        verified = Agent.SignatureStatus.VERIFIED
        if value:
            return queryset.filter(signature_status=verified)
        return queryset.exclude(signature_status=verified)

    def filter_mirrored(self, queryset, name, value):
        if value is None:
            return queryset
        return queryset.filter(origin_peer__isnull=not value)

    def filter_ask(self, queryset, name, value):
        if not value.strip():
            return queryset
        matches, _search = semantic.skill_find(semantic.SkillQuery(text=value), limit=100)
        ranked = semantic.agents_of(matches)
        if not ranked:
            # Still ranked (by nothing), so the lists that order by the rank can.
            return queryset.none().annotate(**{ASK_RANK: Value(0, output_field=IntegerField())})
        # ASK_RANK: the agent's place by relevance, for the lists that rank by it.
        rank = Case(
            *(When(id=agent_id, then=Value(place)) for place, agent_id in enumerate(ranked)),
            output_field=IntegerField(),
        )
        return queryset.filter(id__in=ranked).annotate(**{ASK_RANK: rank})

    def filter_words(self, queryset, name, value):
        for word in words(value):
            queryset = queryset.filter(search_text__contains=word)
        return queryset


def check_valid(filterset: django_filters.FilterSet) -> None:
    """Raises InvalidQueryError naming the first bad parameter, as "<name> <why>"."""
    if filterset.is_valid():
        return
    name, errors = next(iter(filterset.errors.items()))
    raise InvalidQueryError(f"{name} {errors[0]}")


def agent_filter(queryset: QuerySet[Agent], params: Mapping[str, str]) -> QuerySet[Agent]:
    """``queryset`` narrowed by the list's query parameters (API names: ``pushNotifications``,
    ``inputMode``, ...). Raises InvalidQueryError for a bad value."""
    filterset = AgentFilterSet(params, queryset=queryset)
    check_valid(filterset)
    return filterset.qs
