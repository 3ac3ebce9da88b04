"""``python -m kpo_placement``: see :mod:`kpo_placement.cli`."""

from kpo_placement.cli import main

main()
