"""OPTIMIZE: fine-tune models with the losses of SPEC and EqBen, and the demo's captioner.

* :mod:`.losses`: CLIP, SPEC hard-negative and EqSim losses as plain functions of score matrices.
* :mod:`.loop`: ``spotdiff train``, the training loop (accelerate, resumable checkpoints).
* :mod:`.data`: image-caption pairs, whole candidate sets, deterministic samplers, batches.
* :mod:`.models`: dual encoders (Hugging Face and open_clip) built from configs or checkpoints.
* :mod:`.checkpoint`: checkpoints with optimizer, scheduler and RNG states.
* :mod:`.captioner`, :mod:`.tokenizer`: the small BLIP captioner and WordPiece vocabulary of the demo.
"""
