"""Entry point: ``python -m kpo_bench`` (see :mod:`kpo_bench.cli`)."""

from kpo_bench.cli import main

raise SystemExit(main())
