"""Signed Agent Cards: the relay checks the signatures of the cards it fetches (key sets from
real HTTP servers on 127.0.0.1), records what it found, refuses a card that stops verifying
when the agent requires a signature, and signs the cards it serves.

Test cards are signed with jwcrypto, and the relay's own card is checked with jwcrypto: the
relay itself uses joserfc, so each side is checked by an independent implementation."""

from __future__ import annotations

import copy
import json
from contextlib import contextmanager

import pytest
import rfc8785
from django.core.cache import cache
from jwcrypto import jwk, jws

from registry import jwks as relay_jwks
from registry import services, signing
from registry.models import Agent
from tests.cardservers import card_json, card_site, redirect, status
from tests.registry.test_cards import card_v1

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("allow_private_urls")]


@pytest.fixture(autouse=True)
def fresh_key_sets():
    cache.clear()
    relay_jwks._load.cache_clear()
    yield
    cache.clear()


def ec_key(kid: str) -> jwk.JWK:
    return jwk.JWK.generate(kty="EC", crv="P-256", kid=kid)


def jwks_of(*keys: jwk.JWK) -> dict:
    return {"keys": [json.loads(key.export_public()) for key in keys]}


def signed(card: dict, key: jwk.JWK, *, jku: str | None = None, alg: str = "ES256") -> dict:
    """The card with a detached JWS over its RFC 8785 form, made with jwcrypto."""
    unsigned = {k: v for k, v in card.items() if k != "signatures"}
    header = {"alg": alg, "kid": key.get("kid"), "typ": "JOSE"}
    if jku:
        header["jku"] = jku
    token = jws.JWS(rfc8785.dumps(unsigned))
    token.add_signature(key, None, protected=json.dumps(header))
    protected, _payload, signature = token.serialize(compact=True).split(".")
    return {**unsigned, "signatures": [{"protected": protected, "signature": signature}]}


@contextmanager
def serve_signed(card: dict, key: jwk.JWK, *, jwks_keys=None, jku_path="/keys.json"):
    """A site serving the card signed by ``key`` and a key set (``jwks_keys``, default the
    key itself) at ``jku_path``. Yields (site, base URL, signed card); the card's jku points
    at the site."""
    with card_site({}) as (site, url):
        document = signed(card, key, jku=f"{url}{jku_path}")
        site.routes["/.well-known/agent-card.json"] = card_json(document)
        site.routes[jku_path] = card_json(jwks_of(*(jwks_keys or [key])))
        yield site, url, document


def register(url: str, **kwargs) -> Agent:
    agent = services.agent_register(url=url, **kwargs)
    agent.refresh_from_db()
    return agent


def test_a_card_signed_with_a_key_from_its_key_set_is_verified_with_the_key_id():
    key = ec_key("card-key-1")
    with serve_signed(card_v1(), key) as (site, url, _):
        agent = register(url)
    assert agent.signature_status == "verified"
    assert agent.signature_kid == "card-key-1"
    assert agent.signature_jku == f"{url}/keys.json"
    assert "/keys.json" in site.hits


def test_a_card_changed_after_signing_is_invalid():
    key = ec_key("k")
    with serve_signed(card_v1(), key) as (site, url, document):
        tampered = copy.deepcopy(document)
        tampered["description"] = "Forecasts, and also your passwords"
        site.routes["/.well-known/agent-card.json"] = card_json(tampered)
        agent = register(url)
    assert agent.signature_status == "invalid"
    assert "does not match the card's content" in agent.signature_detail


def test_a_signature_by_a_key_not_in_the_key_set_is_invalid():
    signer, other = ec_key("signer"), ec_key("someone-else")
    with serve_signed(card_v1(), signer, jwks_keys=[other]) as (_site, url, _):
        agent = register(url)
    assert agent.signature_status == "invalid"
    assert agent.signature_kid == "signer"
    assert "no usable key 'signer'" in agent.signature_detail


def test_a_key_set_that_cannot_be_fetched_makes_the_signature_invalid_and_is_remembered():
    key = ec_key("k")
    with serve_signed(card_v1(), key) as (site, url, _):
        site.routes["/keys.json"] = status(503)
        agent = register(url)
        assert agent.signature_status == "invalid"
        assert "answered HTTP 503" in agent.signature_detail
        services.agent_card_refresh(agent=agent)
    # The failure is cached briefly: the refresh did not ask the dead key set again.
    assert site.hits.count("/keys.json") == 1


def test_a_key_set_on_a_closed_port_is_unreachable():
    with card_site({}) as (_dead, dead_url):
        pass  # the port is closed again
    with pytest.raises(signing.KeySetError, match="cannot fetch the key set"):
        relay_jwks.fetch_key_set(f"{dead_url}/keys.json")


def test_a_key_set_on_another_port_of_the_card_host_does_not_vouch_for_the_card():
    key = ec_key("k")
    with (
        card_site({"/keys.json": card_json(jwks_of(key))}) as (keys_site, keys_url),
        card_site({}) as (site, url),
    ):
        site.routes["/.well-known/agent-card.json"] = card_json(
            signed(card_v1(), key, jku=f"{keys_url}/keys.json")
        )
        agent = register(url)
    assert agent.signature_status == "invalid"
    assert f"is not at the card's origin ({url})" in agent.signature_detail
    assert keys_site.hits == []


def test_a_key_set_that_redirects_to_another_port_does_not_vouch_for_the_card():
    key = ec_key("k")
    with (
        card_site({"/keys.json": card_json(jwks_of(key))}) as (keys_site, keys_url),
        serve_signed(card_v1(), key) as (site, url, _),
    ):
        site.routes["/keys.json"] = redirect(f"{keys_url}/keys.json")
        agent = register(url)
    assert agent.signature_status == "invalid"
    assert "redirects off its origin" in agent.signature_detail
    assert keys_site.hits == []


def test_a_key_set_that_redirects_within_the_card_origin_still_vouches_for_it():
    key = ec_key("k")
    with serve_signed(card_v1(), key) as (site, url, _):
        site.routes["/moved-keys.json"] = site.routes["/keys.json"]
        site.routes["/keys.json"] = redirect(f"{url}/moved-keys.json")
        agent = register(url)
    assert agent.signature_status == "verified"


def test_a_key_set_on_another_host_does_not_vouch_for_the_card():
    key = ec_key("k")
    with (
        card_site({"/keys.json": card_json(jwks_of(key))}) as (_keys, keys_url),
        card_site({}) as (site, url),
    ):
        foreign = keys_url.replace("127.0.0.1", "localhost")
        site.routes["/.well-known/agent-card.json"] = card_json(
            signed(card_v1(), key, jku=f"{foreign}/keys.json")
        )
        agent = register(url)
    assert agent.signature_status == "invalid"
    assert "is not at the card's origin" in agent.signature_detail


def test_without_jku_the_key_comes_from_the_card_hosts_well_known_key_set():
    key = ec_key("k")
    with card_site({"/.well-known/jwks.json": card_json(jwks_of(key))}) as (site, url):
        site.routes["/.well-known/agent-card.json"] = card_json(signed(card_v1(), key))
        agent = register(url)
    assert agent.signature_status == "verified"


def test_an_unsigned_card_is_recorded_as_unsigned():
    with card_site({"/.well-known/agent-card.json": card_json(card_v1())}) as (_site, url):
        agent = register(url)
    assert agent.signature_status == "unsigned"


def test_hmac_signatures_are_not_accepted():
    key = jwk.JWK.generate(kty="oct", size=256, kid="shared")
    with card_site({}) as (site, url):
        site.routes["/.well-known/agent-card.json"] = card_json(
            signed(card_v1(), key, jku=f"{url}/keys.json", alg="HS256")
        )
        agent = register(url)
    assert agent.signature_status == "invalid"
    assert "'HS256' is not accepted" in agent.signature_detail


def test_registering_with_a_required_signature_refuses_an_unsigned_card():
    with (
        card_site({"/.well-known/agent-card.json": card_json(card_v1())}) as (_site, url),
        pytest.raises(services.RegistryError) as refused,
    ):
        services.agent_register(url=url, require_signature=True)
    assert refused.value.code == "signature_required"
    assert not Agent.objects.exists()


def test_a_required_signature_that_stops_verifying_keeps_the_old_card_and_says_why():
    key = ec_key("k")
    with serve_signed(card_v1(), key) as (site, url, document):
        agent = register(url, require_signature=True)
        first_snapshot = agent.current_snapshot_id
        tampered = copy.deepcopy(document)
        tampered["name"] = "Evil Weather"
        site.routes["/.well-known/agent-card.json"] = card_json(tampered)
        with pytest.raises(services.RegistryError) as refused:
            services.agent_card_refresh(agent=agent)
        assert refused.value.code == "signature_required"
        agent.refresh_from_db()
        assert agent.current_snapshot_id == first_snapshot
        assert agent.name == "Weather"
        assert agent.signature_status == "verified"
        assert agent.card_refused_reason.startswith("invalid: ")
        assert agent.card_refused_at is not None
        # A card signed again verifies, is stored, and clears the refusal.
        site.routes["/.well-known/agent-card.json"] = card_json(
            signed(dict(card_v1(), description="New"), key, jku=f"{url}/keys.json")
        )
        assert services.agent_card_refresh(agent=agent) is True
    agent.refresh_from_db()
    assert agent.description == "New"  # the card's description follows it (no operator edit)
    assert agent.current_snapshot.raw["description"] == "New"
    assert agent.card_refused_reason == ""


def test_an_agent_that_does_not_require_a_signature_takes_a_changed_unsigned_card():
    key = ec_key("k")
    with serve_signed(card_v1(), key) as (site, url, _):
        agent = register(url)
        site.routes["/.well-known/agent-card.json"] = card_json(card_v1(name="Plain"))
        assert services.agent_card_refresh(agent=agent) is True
    agent.refresh_from_db()
    assert agent.signature_status == "unsigned"


def test_the_api_shows_the_signature_and_filters_signed_agents(api):
    key = ec_key("api-key-id")
    with (
        serve_signed(card_v1(name="Signed"), key) as (_site, url, _),
        card_site({"/.well-known/agent-card.json": card_json(card_v1())}) as (_, plain),
    ):
        register(url, agent_id="signed")
        register(plain, agent_id="plain")
    body = api.get("/a2a/registry/signed").json()
    assert body["signature"] == {
        "status": "verified",
        "keyId": "api-key-id",
        "keySetUrl": f"{url}/keys.json",
        "detail": "signed with key 'api-key-id'",
        "checkedAt": body["signature"]["checkedAt"],
        "required": False,
        "refusedAt": None,
        "refusedReason": "",
    }
    assert [a["id"] for a in api.get("/a2a/registry?signed=true").json()["agents"]] == ["signed"]
    assert [a["id"] for a in api.get("/a2a/registry?signed=false").json()["agents"]] == ["plain"]
    bad = api.get("/a2a/registry?signed=maybe")
    assert bad.status_code == 400
    assert "signed" in bad.json()["error"]["message"]


def test_require_signature_is_changed_through_the_api(api):
    with card_site({"/.well-known/agent-card.json": card_json(card_v1())}) as (_site, url):
        answer = api.post("/a2a/registry", {"url": url, "id": "w"}, format="json")
    assert answer.status_code == 201
    changed = api.patch("/a2a/registry/w", {"requireSignature": True}, format="json")
    assert changed.status_code == 200
    assert changed.json()["signature"]["required"] is True


# --- The relay's own signatures ---------------------------------------------------------------


@pytest.fixture
def relay_signing_key(settings, tmp_path):
    key = ec_key("ignored")
    path = tmp_path / "relay-key.pem"
    path.write_bytes(key.export_to_pem(private_key=True, password=None))
    settings.RELAY_CARD_SIGNING_KEY = str(path)
    relay_jwks._load.cache_clear()
    return key


def verify_with_jwcrypto(card: dict, key_set: dict) -> dict:
    """Checks the card's first signature with jwcrypto; returns the protected header."""
    signature = card["signatures"][0]
    unsigned = {k: v for k, v in card.items() if k != "signatures"}
    token = jws.JWS()
    token.deserialize(
        json.dumps(
            {
                "protected": signature["protected"],
                "signature": signature["signature"],
                "payload": jws.base64url_encode(rfc8785.dumps(unsigned)),
            }
        )
    )
    keys = jwk.JWKSet.from_json(json.dumps(key_set))
    header = json.loads(jws.base64url_decode(signature["protected"]))
    token.verify(keys.get_key(header["kid"]))
    return header


def test_the_relays_own_card_and_agent_cards_verify_with_another_jws_library(
    client, relay_signing_key
):
    key_set = client.get("/.well-known/jwks.json").json()
    assert [k["kty"] for k in key_set["keys"]] == ["EC"]
    assert all("d" not in k for k in key_set["keys"])
    for headers in ({}, {"HTTP_A2A_VERSION": "1.0"}):
        card = client.get("/.well-known/agent-card.json", **headers).json()
        header = verify_with_jwcrypto(card, key_set)
        assert header["typ"] == "JOSE"
        assert header["alg"] == "ES256"
        assert header["jku"] == "http://testserver/.well-known/jwks.json"
    with card_site({"/.well-known/agent-card.json": card_json(card_v1())}) as (_site, url):
        register(url, agent_id="weather")
    served = client.get("/a2a/agents/weather/.well-known/agent-card.json").json()
    verify_with_jwcrypto(served, key_set)
    tampered = dict(served, name="Not Weather")
    with pytest.raises(jws.InvalidJWSSignature):
        verify_with_jwcrypto(tampered, key_set)


def test_the_relays_cards_also_verify_over_their_proto_form_as_a2a_sdk_checks(
    client, relay_signing_key
):
    """The specification's payload (the 1.0 proto form, canonicalised by a2a-sdk's own JCS
    code) verifies for every card the relay serves, the hybrid 0.3 card included."""
    key_set = jwk.JWKSet.from_json(json.dumps(client.get("/.well-known/jwks.json").json()))
    for headers in ({}, {"HTTP_A2A_VERSION": "1.0"}):
        card = client.get("/.well-known/agent-card.json", **headers).json()
        payload = jws.base64url_encode(sdk_payload(card))
        verified = 0
        for signature in card["signatures"]:
            token = jws.JWS()
            token.deserialize(json.dumps({**signature, "payload": payload}))
            try:
                token.verify(
                    key_set.get_key(json.loads(jws.base64url_decode(signature["protected"]))["kid"])
                )
            except jws.InvalidJWSSignature:
                continue
            verified += 1
        assert verified == 1, headers


def test_the_relays_signed_card_verifies_with_the_relays_own_checker(client, relay_signing_key):
    """What one relay serves, another relay accepts as verified."""
    from registry import signing

    card = client.get("/.well-known/agent-card.json").json()
    key_set = client.get("/.well-known/jwks.json").json()
    check = signing.verify_card(
        card, card_url="http://testserver/.well-known/agent-card.json", key_set=lambda _u: key_set
    )
    assert check.status == "verified"


def test_without_a_signing_key_cards_are_unsigned_and_the_key_set_is_empty(client, settings):
    settings.RELAY_CARD_SIGNING_KEY = ""
    assert "signatures" not in client.get("/.well-known/agent-card.json").json()
    assert client.get("/.well-known/jwks.json").json() == {"keys": []}


def sdk_payload(document: dict) -> bytes:
    """What a2a-sdk's signer signs: the card parsed to the 1.0 proto, without signatures and
    empty values, canonicalised by the SDK's own RFC 8785 code."""
    from a2a.client.card_resolver import parse_agent_card
    from a2a.utils._jcs import canonicalize
    from google.protobuf.json_format import MessageToDict

    from registry.signing import _clean_empty

    proto = MessageToDict(parse_agent_card(copy.deepcopy(document)))
    proto.pop("signatures", None)
    return canonicalize(_clean_empty(proto)).encode()


def test_a_card_signed_over_its_proto_form_as_a2a_sdk_signs_verifies():
    from tests.registry.test_cards import card_v03

    key = ec_key("sdk-key")
    document = card_v03(iconUrl="")  # a 0.3 card: its proto form differs from the document
    with card_site({}) as (site, url):
        token = jws.JWS(sdk_payload(document))
        header = {"alg": "ES256", "kid": "sdk-key", "typ": "JOSE", "jku": f"{url}/keys.json"}
        token.add_signature(key, None, protected=json.dumps(header))
        protected, _payload, signature = token.serialize(compact=True).split(".")
        assert sdk_payload(document) != rfc8785.dumps(document)
        signed_document = {
            **document,
            "signatures": [{"protected": protected, "signature": signature}],
        }
        site.routes["/.well-known/agent-card.json"] = card_json(signed_document)
        site.routes["/keys.json"] = card_json(jwks_of(key))
        agent = register(url)
    assert agent.signature_status == "verified", agent.signature_detail


def test_an_rsa_signature_verifies():
    key = jwk.JWK.generate(kty="RSA", size=2048, kid="rsa-key")
    with card_site({}) as (site, url):
        site.routes["/.well-known/agent-card.json"] = card_json(
            signed(card_v1(), key, jku=f"{url}/keys.json", alg="RS256")
        )
        site.routes["/keys.json"] = card_json(jwks_of(key))
        agent = register(url)
    assert (agent.signature_status, agent.signature_kid) == ("verified", "rsa-key"), (
        agent.signature_detail
    )


def test_the_relay_signs_a_card_once_and_serves_the_same_signatures_again(relay_signing_key):
    card = card_v1()
    first = relay_jwks.sign_served_card(card, jku="http://testserver/.well-known/jwks.json")
    again = relay_jwks.sign_served_card(card, jku="http://testserver/.well-known/jwks.json")
    # ECDSA signatures differ at each signing: equal ones were kept, not made again.
    assert again["signatures"] == first["signatures"]
    changed = relay_jwks.sign_served_card(
        dict(card, version="9"), jku="http://testserver/.well-known/jwks.json"
    )
    assert changed["signatures"][0] != first["signatures"][0]
    assert "signatures" not in card


def test_a_signing_key_that_cannot_be_used_is_a_startup_error(settings, tmp_path):
    from registry.checks import check_card_signing_key

    settings.RELAY_CARD_SIGNING_KEY = str(tmp_path / "missing.pem")
    relay_jwks._load.cache_clear()
    [error] = check_card_signing_key(None)
    assert error.id == "relay.E010"
    assert "neither a PEM key nor a readable file" in error.msg
    (tmp_path / "public.pem").write_bytes(ec_key("k").export_to_pem())
    settings.RELAY_CARD_SIGNING_KEY = str(tmp_path / "public.pem")
    assert check_card_signing_key(None)[0].id == "relay.E010"
