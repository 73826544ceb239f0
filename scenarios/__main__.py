"""``python -m scenarios``: the command line lives in :mod:`commands.scenarios`."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported

from commands.scenarios import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
