"""OPTIMIZE: fine-tune models with the losses of SPEC and EqBen, and the demo's captioner.

:mod:`.loop` (``spotdiff train``'s :class:`~.loop.Trainer`) with :mod:`.callbacks`, :mod:`.objective`
(the loss, built once) over :mod:`.losses`, :mod:`.data`, :mod:`.models`, :mod:`.checkpoint`,
:mod:`.optim`; :mod:`.captioner` and :mod:`.tokenizer` for the demo. docs/training.md explains them.
"""
