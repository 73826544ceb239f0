"""``python -m ranking``: the command line lives in :mod:`commands.ranking`."""

from commands.ranking import main

if __name__ == "__main__":
    raise SystemExit(main())
