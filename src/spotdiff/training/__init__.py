"""Pieces of the fine-tuning loop in :mod:`spotdiff.train`: model backends (``models``), data and
batches (``data``), checkpoints and resumption (``checkpoint``)."""
