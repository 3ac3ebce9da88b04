"""``python -m kpo_devenv``: the ``kpo-devenv`` command line."""

from kpo_devenv.cli import app

app()
