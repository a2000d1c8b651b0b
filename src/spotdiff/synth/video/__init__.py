"""Video mining: EqBen's natural subsets (EQ-AG, EQ-GEBC, EQ-YouCook2; EqBen Sec. 4.1, App. B.1-B.3).

Each source's rule runs on its annotations alone (:mod:`.action_genome`, :mod:`.gebc`, :mod:`.youcook2`);
only the frames that are kept are decoded (:mod:`.frames`). Needs the ``video`` extra.
"""
