"""DIAGNOSE: does a model see the difference? Cases through a model, into metrics with CIs, recorded.

* :mod:`.engine`: cases x scorer -> score matrices (dedup, batching, cache, resumption).
* :mod:`.cache`: the persistent model-output cache (SQLite).
* :mod:`.runner`: one evaluation run; :mod:`.recorder`: :class:`~.recorder.RunRecorder`, the one way a run is
  recorded, and the output folder's claim.
* :mod:`.store`: the run store (SQLite); every SQL statement against it lives there.
* :mod:`.distributed`: sharded evaluation under torchrun / accelerate launch.
* :mod:`.debias`: VisualGPTScore's language prior, PMI, alpha-debiasing and blind-prior diagnosis.
"""
