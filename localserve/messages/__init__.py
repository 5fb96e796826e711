"""The wire's values: the ``Request`` a handler gets, Content-Type to payload, multipart parts, a
handler's result to status, headers and body, the encodings, and what a client is told of an error.

The bottom of the package beside ``config`` and ``errors``: every layer may use it; it uses neither
the engine nor a door.
"""
