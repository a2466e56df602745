"""The registry in the Django admin.

Writes go through ``registry.services``, as the API's do: agents are added by registering a URL
(the card is fetched and parsed), edited with ``agent_update`` and re-fetched with
``agent_card_refresh``; API keys are made by ``api_key_create`` and ended by ``api_key_revoke``.
Card-derived data is read-only. Card content is always escaped; stored credentials and key
hashes are never shown.

Each part has its module; importing them here, where Django's admin looks, registers them:

- ``admin_agents``: agents (list, page, registering by URL, re-fetching cards);
- ``admin_forms``: the agent admin's forms and its credential fields;
- ``admin_cards``: the card's skills and extensions, and the card history;
- ``admin_identity``: token issuers and access rules;
- ``admin_usage``: agents' prices and quotas;
- ``admin_keys``: API keys; ``admin_audit``: the audit log; ``admin_peers``: peer relays;
- ``admin_display``: what they share (stylesheet, JSON blocks, badges, the read-only admin).
"""

from registry import (  # noqa: F401
    admin_agents,
    admin_audit,
    admin_cards,
    admin_identity,
    admin_keys,
    admin_peers,
    admin_usage,
)
