"""Storing a fetched card on its agent: a snapshot of it, the agent's fields, skills, declared
extensions and search facets. Runs inside the caller's transaction (``registry.services``)."""

from __future__ import annotations

from django.utils import timezone

from registry import semantic
from registry.cards import ParsedCard
from registry.fetching import FetchedCard
from registry.models import Agent, CardSnapshot, DeclaredExtension, Skill


def card_apply(agent: Agent, fetched: FetchedCard, *, created: bool) -> None:
    """Writes a fetched card onto the agent: a snapshot, its fields, skills and extensions.
    Runs inside the caller's transaction."""
    card = fetched.card
    now = timezone.now()
    # Name and description follow the card unless an operator changed them.
    said = {} if created or agent.current_snapshot is None else agent.current_snapshot.normalized
    if created or agent.name in ("", said.get("name")):
        agent.name = card.name
    if created or agent.description in ("", said.get("description")):
        agent.description = card.description
    agent.version = card.version
    agent.card_protocol_version = card.protocol_version
    agent.protocol_versions = list(card.protocol_versions)
    agent.bindings = list(card.bindings)
    agent.interfaces = [
        {
            "url": i.url,
            "protocolBinding": i.binding,
            "protocolVersion": i.protocol_version,
            **({"tenant": i.tenant} if i.tenant else {}),
        }
        for i in card.interfaces
    ]
    agent.streaming = card.streaming
    agent.push_notifications = card.push_notifications
    agent.extended_card = card.extended_card
    agent.default_input_modes = list(card.default_input_modes)
    agent.default_output_modes = list(card.default_output_modes)
    agent.provider_organization = card.provider_organization[:200]
    agent.provider_url = card.provider_url[:2048]
    agent.documentation_url = card.documentation_url[:2048]
    agent.icon_url = card.icon_url[:2048]
    agent.card_fetched_at = now
    agent.updated_at = now
    _write_facets(agent, card)
    agent.save()

    snapshot = CardSnapshot.objects.create(
        agent=agent,
        raw=fetched.document,
        normalized=card.normalized,
        content_hash=card.content_hash,
        protocol_version=card.protocol_version,
        source_url=fetched.url,
        fetched_at=now,
    )
    agent.current_snapshot = snapshot
    agent.save(update_fields=["current_snapshot"])

    if not created:
        agent.skills.all().delete()
        agent.extensions.all().delete()
    skills = [
        Skill(
            agent=agent,
            skill_id=skill.id,
            name=skill.name,
            description=skill.description,
            tags=list(skill.tags),
            examples=list(skill.examples),
            input_modes=list(skill.input_modes),
            output_modes=list(skill.output_modes),
            position=position,
            search_text=_skill_search_text(skill),
            tag_facets=_facet(t.lower() for t in skill.tags),
            input_mode_facets=_facet(
                m.lower() for m in skill.input_modes or card.default_input_modes
            ),
            output_mode_facets=_facet(
                m.lower() for m in skill.output_modes or card.default_output_modes
            ),
        )
        for position, skill in enumerate(_unique_skills(card))
    ]
    # Embeddings for search by meaning; without the model they stay empty and the
    # registry.reindex_skill_embeddings job fills them in later.
    semantic.embed_skills(skills)
    Skill.objects.bulk_create(skills)
    DeclaredExtension.objects.bulk_create(
        [
            DeclaredExtension(
                agent=agent,
                uri=extension.uri,
                description=extension.description,
                required=extension.required,
                params=extension.params,
            )
            for extension in {e.uri: e for e in card.extensions}.values()
        ]
    )


def _unique_skills(card: ParsedCard):
    # A card listing the same skill id twice keeps the first; the database holds one per id.
    return list({skill.id: skill for skill in reversed(card.skills)}.values())[::-1]


def _facet(values) -> str:
    values = [v for v in dict.fromkeys(values) if v]
    return "|" + "|".join(v.replace("|", "/") for v in values) + "|" if values else ""


def _skill_search_text(skill) -> str:
    return " ".join([skill.id, skill.name, skill.description, *skill.tags]).lower()


def agent_search_text(agent: Agent, skill_texts) -> str:
    return " ".join([agent.id, agent.name, agent.description, *skill_texts]).lower()


def _write_facets(agent: Agent, card: ParsedCard) -> None:
    skills = card.skills
    agent.search_text = agent_search_text(agent, [_skill_search_text(s) for s in skills])
    agent.skill_facets = _facet(s.id.lower() for s in skills)
    agent.tag_facets = _facet(t.lower() for s in skills for t in s.tags)
    agent.extension_facets = _facet(e.uri for e in card.extensions)
    agent.input_mode_facets = _facet(
        m.lower() for m in [*card.default_input_modes, *(m for s in skills for m in s.input_modes)]
    )
    agent.output_mode_facets = _facet(
        m.lower()
        for m in [*card.default_output_modes, *(m for s in skills for m in s.output_modes)]
    )
