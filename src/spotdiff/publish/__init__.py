"""PUBLISH: what ``spotdiff synth`` writes, as a Hugging Face Hub dataset (``spotdiff synth publish DIR``,
``spotdiff synth ENGINE --push-to-hub ORG/NAME``): parquet shards with ``datasets``' Image and Video features, one
config per subset, a dataset card with its provenance and review, and the declaration (``spotdiff.yaml``) that
``spotdiff eval --benchmark hf:ORG/NAME`` rebuilds its cases from. Usage: docs/declared.md.
"""

from spotdiff.publish.folder import Published, publish, write_layout

__all__ = ["Published", "publish", "write_layout"]
