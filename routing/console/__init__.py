"""What ``make up`` (``manage.py run_relay``) keeps on this machine and shows on its console:
the credentials of its first run, and the short live status."""
