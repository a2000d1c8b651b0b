"""Review synthesized data in the browser: ``spotdiff review OUT`` (docs/synthesis.md, "Reviewing").

A local page (:mod:`.server`, Starlette on uvicorn, bound to 127.0.0.1 with a random token) shows each
item of a synthesis run's review sheet and saves one reviewer's decisions at once (:mod:`.session`);
:mod:`.agreement` measures how far several reviewers agree.
"""
