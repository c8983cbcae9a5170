"""litmus-review's Inspect extra (``pip install 'litmus-review[inspect]'``): proof at the source.

- ``litmus_inspect.hook``: the capture-proof hook (``<log>.proof.jsonl``), loaded by Inspect
  through the ``inspect_ai`` entry point and idle unless turned on (``LITMUS_REVIEW_PROOF=1`` or
  task metadata ``litmus_review_proof: true``).
- ``strict(scorer, verdict="safe=C;unsafe=I")``: a scorer guard that returns an explicit
  unscored value where a benign verdict's capture or judge input cannot be proven; harm is
  returned as the scorer found it.
- ``ProofWriter`` (from ``scoring.proof``, which needs no Inspect): the writer any harness can call.

The side log's format: ``docs/proof-side-log.md``. The scoring core (``scoring``) never imports
this package.
"""

from scoring.proof import ProofWriter

from .guard import strict
from .hook import ENV_VAR, HOOK_VERSION, METADATA_FLAG, ProofHook

__all__ = ["ENV_VAR", "HOOK_VERSION", "METADATA_FLAG", "ProofHook", "ProofWriter", "strict"]
