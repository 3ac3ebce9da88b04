"""kopf's record of the last handled spec, kept as a digest instead of a copy of the spec.

kopf decides whether an object's spec changed (and so whether to call the ``on.update``
handlers registered with ``field="spec"``) by comparing the object's *essence* (its spec,
labels and annotations) with the essence it stored after the last handling, by default
in the annotation ``<prefix>/last-handled-configuration``. Stored as is, that annotation
is a second copy of the spec: about 100 KiB for a PartitionReassignment of 2,000
partitions, which the API server decodes, validates and encodes again at every status
write of the object, and sends to every watcher (the API server's CPU per status PATCH
grows with the object's size).

:class:`SpecDigestDiffBaseStorage` stores the essence with the spec replaced by its
SHA-256 digest. A changed spec still changes the essence, so kopf still sees the change
on ``spec`` and calls the handlers; what is lost is the field-by-field ``diff``, ``old``
and ``new`` kopf passes to handlers, which this operator's handlers do not use (they
reconcile the whole object; :mod:`kpo_operator.handlers`). An object last handled by an
operator that stored the whole spec is seen as changed once after the upgrade and
reconciled again, which changes nothing (the reconcilers act on ``metadata.generation``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any, cast

import kopf

SPEC_DIGEST = "sha256"
"""The key of the digest in the stored ``spec`` stanza."""


def spec_digest(spec: Any) -> str:
    """Return the SHA-256 hex digest of ``spec`` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class SpecDigestDiffBaseStorage(kopf.AnnotationsDiffBaseStorage):
    """kopf's annotations diff-base storage with the spec stored as its digest.

    Made as kopf's :class:`kopf.AnnotationsDiffBaseStorage` (``prefix``: the operator's
    API group).
    """

    def build(
        self,
        *,
        body: kopf.Body,
        extra_fields: Iterable[Any] | None = None,
    ) -> kopf.BodyEssence:
        """Return kopf's essence of ``body`` with ``spec`` replaced by ``{"sha256": digest}``."""
        essence = cast(dict[str, Any], super().build(body=body, extra_fields=extra_fields))
        if "spec" in essence:
            essence["spec"] = {SPEC_DIGEST: spec_digest(essence["spec"])}
        return cast(kopf.BodyEssence, essence)
