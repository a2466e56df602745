"""`python -m routing.demo`: the demo agents, served until Ctrl-C."""

import argparse
import signal
import threading

from routing.demo.agents import serve_demo_agents


def main(argv: list[str] | None = None) -> None:
    """`python -m routing.demo [--host H] [--port P]`: serves the demo agents until SIGINT
    (Ctrl-C) or SIGTERM.
    """
    parser = argparse.ArgumentParser(description="Serve the Brass Relay demo A2A agents.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9301, help="first port; 0 for free ports")
    args = parser.parse_args(argv)

    stop = threading.Event()
    for signal_number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signal_number, lambda *_: stop.set())
    with serve_demo_agents(host=args.host, first_port=args.port) as group:
        for name, url in group.urls.items():
            print(f"{name:<12} {url}/.well-known/agent-card.json", flush=True)
        while not stop.wait(1.0):
            pass


if __name__ == "__main__":
    main()
