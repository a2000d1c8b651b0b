"""Procedural canvases: SPEC's progressive pipeline (Sec. 3.2) drawn offline, and the engines built on it.

The stages (:mod:`.objects`, :mod:`.layout`, :mod:`.backgrounds`, bundled by :mod:`.pipeline`) and SPEC's
definitions (:mod:`.geometry`) serve the ``spec``, ``eqben`` (EQ-Kubric), ``zeroshot`` and ``corpus``
engines; the diffusion family plugs model-backed stages into the same pipeline.
"""
