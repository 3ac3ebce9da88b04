"""``python -m tools.docgen``: write every generated page of the documentation."""

from __future__ import annotations

import sys

from tools.docgen import pages


def main() -> int:
    """Write each page; print the ones that changed."""
    for page in pages():
        if page.write():
            print(f"wrote {page.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
