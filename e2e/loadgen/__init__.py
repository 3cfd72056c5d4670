"""The load generator's private parts; the public API is ``e2e.load``.

- ``sse``: Server-Sent-Events framing and the checks on every event of one stream (pure).
- ``conn``: keep-alive HTTP/1.1 connections that feed each read of a body to its stream.
- ``stream``: one client process's requests (closed or open loop) -> ``RequestRecord``s.
- ``arrivals``: the open-loop arrival schedule (gamma inter-arrival gaps, seeded).
- ``clientstats``: the client's CPU use and event-loop lag -> ``ClientStats``.
- ``workers``: sharding one load over several pinned client processes, merging the records.
"""
