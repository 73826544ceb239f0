"""``python -m db``: the command line lives in :mod:`commands.db`."""

from commands.db import main

if __name__ == "__main__":
    raise SystemExit(main())
