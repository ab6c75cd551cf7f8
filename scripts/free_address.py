"""``python scripts/free_address.py HOST:PORT``: exit 0 if a server can listen there, else say so in one line.

``make serve`` runs it first, before it installs or builds anything: a busy port would otherwise
fail only once the site is built, minutes later, with a traceback. Only the standard library, so
it runs before ``.venv`` exists.
"""

from __future__ import annotations

import socket
import sys


def problem(address: str) -> str | None:
    """Why a server cannot listen on ``address`` (``host:port``), or None if it can."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return f"{address!r} is not HOST:PORT (such as 127.0.0.1:8000)"
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: a closed
        try:  # connection's lingering port is free, a listening server's is not
            probe.bind((host.strip("[]"), int(port)))
        except OSError as error:
            return f"{address} is in use ({error.strerror})"
    return None


def main(address: str) -> int:
    found = problem(address)
    if found is None:
        return 0
    host, _, port = address.rpartition(":")
    other = f"{host or '127.0.0.1'}:{int(port) + 1 if port.isdigit() else 8001}"
    print(f"make serve: {found}; pick another address: make serve SERVE_ADDR={other}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
