import contextlib
import threading

from django.core.management.base import BaseCommand

from routing.demo.agents import serve_demo_agents


class Command(BaseCommand):
    help = "Serves the demo A2A agents (triage, researcher, writer, echo) on 127.0.0.1."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument(
            "--port",
            type=int,
            default=9301,
            help="First port; the agents take consecutive ports. 0: any free.",
        )
        parser.add_argument(
            "--register", action="store_true", help="Also register them with this relay."
        )

    def handle(self, *args, host, port, register, **options):
        with serve_demo_agents(host=host, first_port=port) as group:
            for name, url in group.urls.items():
                self.stdout.write(f"{name:<11} {url}/.well-known/agent-card.json")
            if register:
                from routing.demo.setup import demo_agents_register

                for line in demo_agents_register(group.urls):
                    self.stdout.write(line)
            self.stdout.write("Serving until Ctrl-C.")
            with contextlib.suppress(KeyboardInterrupt):
                threading.Event().wait()
