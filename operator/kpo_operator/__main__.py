"""``python -m kpo_operator``: run the operator (kopf) with settings from ``KPO_*`` variables.

Out of cluster it uses ``KUBECONFIG``; in a pod, the service account. It runs
standalone (no kopf peering): deploy one replica. ``KPO_LIVENESS_PORT`` serves
kopf's liveness probe at ``/healthz`` on that port when set.
"""

from __future__ import annotations

import logging
import os
import sys

import kopf

from kpo_operator.settings import OperatorSettings, SettingsError


def main() -> int:
    """Run until SIGTERM/SIGINT; returns the process exit code (2 on bad settings)."""
    try:
        settings = OperatorSettings.from_env()
    except SettingsError as exc:
        print(f"kpo-operator: {exc}", file=sys.stderr)
        return 2
    kopf.configure(verbose=bool(os.environ.get("KPO_DEBUG")))
    logging.getLogger("kafka").setLevel(logging.WARNING)  # kafka-python's connection chatter
    import kpo_operator.handlers  # noqa: F401 - registers the handlers

    port = os.environ.get("KPO_LIVENESS_PORT")
    kopf.run(
        standalone=True,
        clusterwide=settings.clusterwide,
        namespaces=list(settings.namespaces),
        liveness_endpoint=f"http://0.0.0.0:{port}/healthz" if port else None,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
