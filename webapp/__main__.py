"""``python -m webapp``: the command line lives in :mod:`commands.webapp`."""

from commands.webapp import main

if __name__ == "__main__":
    raise SystemExit(main())
