"""The generated pages of the documentation: each written from what defines it.

``python -m tools.docgen`` (``make docs``) writes every page of :data:`PAGES`; the tests in
``tests/unit/docs`` generate each page in memory and fail when the file differs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tools.docgen.common import ROOT


@dataclass(frozen=True)
class Page:
    """One generated page.

    Attributes:
        path: the page, relative to the repository.
        generate: returns its Markdown.
    """

    path: str
    generate: Callable[[], str]

    def write(self, root: Path = ROOT) -> bool:
        """Write the page under ``root``; return whether its content changed."""
        target = root / self.path
        text = self.generate()
        if target.exists() and target.read_text() == text:
            return False
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return True


def pages() -> list[Page]:
    """Return every generated page (imports the generators, which import the product)."""
    from tools.docgen import (
        bench_results,
        broker_configs,
        chart_values,
        cli,
        crds,
        metrics,
        operator_settings,
        reasons,
    )

    return [
        Page(crds.PAGE, crds.generate),
        Page(operator_settings.PAGE, operator_settings.generate),
        Page(chart_values.PAGE, chart_values.generate),
        Page(broker_configs.PAGE, broker_configs.generate),
        Page(metrics.PAGE, metrics.generate),
        Page(reasons.PAGE, reasons.generate),
        Page(cli.PAGE, cli.generate),
        Page(bench_results.PAGE, bench_results.generate),
    ]
