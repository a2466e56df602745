"""Stored cards get back the integers protobuf turned into floats.

Before this, ``normalized`` (the 1.0 form the relay serves) held extension ``params`` and
signature ``header`` as protobuf's Struct gives them: ``2`` as ``2.0``, large integers rounded.
``raw`` holds the card as fetched, so each snapshot's Struct fields are copied back from it
(``registry.cards.restore_json_fields``). A refresh that finds the same card adds no snapshot,
so without this the served card would keep its floats until the agent changed its card.
"""

import copy
import json

from django.db import migrations


def restore_integers(apps, schema_editor):
    from registry.cards import restore_json_fields

    CardSnapshot = apps.get_model("registry", "CardSnapshot")
    for snapshot in CardSnapshot.objects.only("id", "raw", "normalized").iterator():
        if not isinstance(snapshot.raw, dict) or not isinstance(snapshot.normalized, dict):
            continue
        before = snapshot.normalized
        after = restore_json_fields(snapshot.raw, copy.deepcopy(before))
        if json.dumps(after, sort_keys=True) != json.dumps(before, sort_keys=True):
            CardSnapshot.objects.filter(pk=snapshot.pk).update(normalized=after)


class Migration(migrations.Migration):

    dependencies = [
        ("registry", "0005_stream_idle_seconds"),
    ]

    operations = [
        migrations.RunPython(restore_integers, migrations.RunPython.noop, elidable=True),
    ]
