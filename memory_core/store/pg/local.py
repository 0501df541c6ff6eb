"""A local PostgreSQL for trying the PostgreSQL store on one machine (``make serve-pg``).

    python -m memory_core.store.pg.local DIR          # start (or find) it; prints its URI
    python -m memory_core.store.pg.local DIR --stop   # stop it

The server is PostgreSQL 16 from the ``pgserver`` wheel (the ``postgres`` extra), its data in
``DIR``, listening on a Unix socket in ``DIR`` only (no TCP port); started as root it runs as
a non-root user pgserver makes. It stays up after this command, so a service (or several)
can use it; the printed URI is what ``--store`` takes. For an existing server, pass its URI
(``postgresql://USER:PASSWORD@HOST:PORT/DB``) to ``--store`` directly: nothing here is needed.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memory_core.store.pg.local",
                                     description="start or stop a local PostgreSQL (pgserver)")
    parser.add_argument("data_dir", metavar="DIR", help="the server's data directory")
    parser.add_argument("--stop", action="store_true", help="stop the server of DIR")
    args = parser.parse_args(argv)
    with warnings.catch_warnings():  # platformdirs: no XDG_RUNTIME_DIR on many machines
        warnings.simplefilter("ignore")
        try:
            from pgserver.postgres_server import get_server
        except ImportError:
            print("error: a local PostgreSQL needs pgserver: pip install "
                  "'memory_core[postgres]'", file=sys.stderr)
            return 1
        data = Path(args.data_dir).resolve()
        if args.stop:
            get_server(data, cleanup_mode="stop").cleanup()
            return 0
        data.mkdir(parents=True, exist_ok=True)
        print(get_server(data, cleanup_mode=None).get_uri())
    return 0


if __name__ == "__main__":
    sys.exit(main())
