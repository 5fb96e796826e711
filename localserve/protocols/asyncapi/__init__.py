"""Cortex AsyncAPIs: ``POST /<api>`` stores a job and answers its id, a worker runs it, ``GET /<api>/<id>`` polls.

Jobs live in a durable store (SQLite under the cache folder by default, Redis when replicas span machines), survive
``kill -9`` (at-least-once), and are shared safely by the replicas. ``routes`` (AsyncJobs, the submit/poll door),
``worker``, ``oneshot`` (``run``'s one job), ``store`` (open_store; the records in ``jobs``), ``config``
(``--async-store``), ``kubernetes``; none imported here, so ``config`` and ``store`` serve the CLI and ``export``
without the engine.
"""
