"""The HTTP/1.1 connection under the app: every use of uvicorn's internals lives in this package.

- ``protocol.py``: uvicorn's httptools protocol with limits on the request head (431), read timeouts (408) and JSON
  refusals; it puts the fast path (``writes.FastReply``) in each scope;
- ``guarded.py``: its state, timers and refusals, and chunked trailers (counted against the head's limit, 431; dropped,
  never request headers);
- ``writes.py``: answers written whole, by the loop in one write or by the API's thread;
- ``refusals.py``: what the connection refuses, in words, and the refusal written whole;
- ``server.py``: uvicorn's ``Server`` as we run it (a signal begins the App's graceful shutdown).

``tests/server/test_uvicorn_contract.py`` checks the internals these modules rely on, and ``pyproject.toml`` bounds
uvicorn and httptools to the versions those tests passed on.
"""
