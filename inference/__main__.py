"""``python -m inference``: the command line lives in :mod:`commands.inference`."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported

from commands.inference import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
