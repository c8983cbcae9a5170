"""Strict scoring of runs on a Dask cluster (``litmus-review score --engine dask``), and the
Parquet score table it writes and the app reads.

The unit of work is the local import's: a block of whole lines, scored by ``ingest.score_bytes``
(one scorer, one set of strict rules). What differs is who reads and who adds up:

- **Reading.** The client reads each run's header line and size, nothing more. Each block task
  is given a nominal byte range ``[start, end)`` and reads it itself, from a local path or any
  fsspec URL (``s3://``, ``gs://``, ``file://``): it owns the lines that *start* inside the
  range, so it skips a partial first line (unless the byte before ``start`` is a newline, or
  ``start`` is the first byte after the header) and reads past ``end`` to finish its last line.
  The client never scans the file for line boundaries.
- **Line numbers.** Each block reports how many lines it spans; the final stage numbers them
  with a prefix sum, so rows and rejections carry the same line numbers as the workspace's.
- **Adding up.** One task per run, on a worker, takes every block's score fields (not its
  rows), settles ids seen in two blocks exactly as the workspace writer does, and calls
  ``aggregate.summarize`` through ``report.Evaluation``: the client receives the ``score --json``
  object and the table text, not the rows.
- **Writing** (``out``). Each block's rows go to a Parquet part written by a worker into a
  staging folder inside ``out``; the run is published into the table once every part and its
  summaries are written. A block that fails fails its run alone, and the error names the file
  and line.

Tasks are pure functions of their inputs, so a block lost with a worker is scored again and
counted once: the totals are computed from block results, never accumulated as a side effect.

The rooms, each importing only those below it:

- ``run_results``: the status constants, ``RunResult`` and ``Progress`` (shared by all);
- ``storage``: locations, file systems, the storage deadline, how a storage error is said;
- ``planning``: ``RunPlan``, the inputs of a fleet, byte-range blocks;
- ``table_layout``, ``table_reader``, ``table_writer``: the score table (its files and schema;
  its reader, the app's; its writer); ``table_workspace``: a table's run labelled or imported
  in the workspace;
- ``cluster``: connecting to a cluster and checking its workers;
- ``tasks``: what the workers run for one run;
- ``workspace_scorer``: ``import --engine dask``;
- ``fleet``: ``score_runs``, a fleet of runs.
"""
