"""The user's project: its directory (cwd, ``sys.path``, ``.env``, requirements), the ignore rules
that decide what is packaged, and ``compat``, the platforms' surroundings its code relies on."""
