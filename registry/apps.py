from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "registry"
    verbose_name = "Agent registry"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from registry import access, checks, principals  # noqa: F401 - checks registers them
        from registry.identity_models import AccessRule, TokenIssuer

        # A changed token issuer is read again, with its keys, at once in this process.
        for signal, name in ((post_save, "saved"), (post_delete, "deleted")):
            signal.connect(
                principals.issuers_changed, sender=TokenIssuer, dispatch_uid=f"issuer-{name}"
            )
            # A changed access rule applies at once in this process.
            signal.connect(access.rules_changed, sender=AccessRule, dispatch_uid=f"rule-{name}")
