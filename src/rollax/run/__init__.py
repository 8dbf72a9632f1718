"""The outer ring: a run of an algorithm in a run folder.

``config`` (:class:`~rollax.run.config.RunConfig`, settings -> a run), ``experiment`` (lanes,
the compiled chunks, the chunk loop), ``training`` (a run in a folder: metrics, checkpoints,
resume, summary), ``folder`` and ``checkpoint`` and ``files`` (what a run folder holds and how
it is written), ``loggers`` (experiment trackers), ``plots`` (figures), ``stats`` (intervals),
``loaded`` (a trained policy, ``load_run``) and ``compile_cache``. The math and the algorithms
import nothing from here.
"""
