"""The processes of a server: the supervisor (one process, or N replicas on one port), the replica
processes and the peer APIs that ``localserve run`` starts when a project's code calls them."""
