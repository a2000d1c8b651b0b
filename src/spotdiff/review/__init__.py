"""What a review is, and the page that makes one: ``spotdiff review OUT`` (docs/synthesis.md, "Reviewing").

The one home of the review (issue 43: gathered from ``spotdiff.synth.review`` and ``spotdiff.synth.eqben_review``):
:mod:`.sheet` holds the items, the sheet a person edits, the decisions and the rules that make several reviewers'
decisions one; :mod:`.kinds` the columns of each engine family's sheet and which sheet a folder has, with
:mod:`.pairs` (EqBen pairs) and :mod:`.sets` (SPEC sets) deriving a sheet from published output; :mod:`.agreement`
measures how far several reviewers agree. A local page (:mod:`.server`, Starlette on uvicorn, bound to 127.0.0.1
with a random token) shows each item and saves one reviewer's decisions at once (:mod:`.session`). The synthesis
engines write their sheets and read them back (``--from-review``) through this package, which sits below them.
"""
