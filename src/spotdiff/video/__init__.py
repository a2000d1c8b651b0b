"""Videos: frames decoded with PyAV (:mod:`.frames`) and clips as a case's items (:mod:`.clips`).

A benchmark's case holds :class:`~.clips.VideoRef` s (a video file, or a window of one); a scorer that takes
videos names the rule its frames are sampled by (:class:`~.clips.FrameRule`), and the engine hands it each
clip's frames (:class:`~.clips.Clip`), cached by the clip's content and the rule. Needs the ``video`` extra.
"""
