"""``cortex_internal.lib``: see ``cortex_internal.lib.log``."""
