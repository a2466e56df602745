from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "registry"
    verbose_name = "Agent registry"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from registry import checks, principals  # noqa: F401 - checks registers the checks
        from registry.identity_models import TokenIssuer

        # A changed token issuer is read again, with its keys, at once in this process.
        for signal, name in ((post_save, "saved"), (post_delete, "deleted")):
            signal.connect(
                principals.issuers_changed, sender=TokenIssuer, dispatch_uid=f"issuer-{name}"
            )
