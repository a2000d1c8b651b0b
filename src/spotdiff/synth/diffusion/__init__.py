"""Diffusion engines: SPEC's model-backed stages (text-to-image, Grounding DINO + SAM, inpainting) and
EqBen's EQ-SD pairs by prompt-to-prompt; every model folder checked before anything heavy loads.

Needs the ``generate`` extra (diffusers), imported lazily.
"""
