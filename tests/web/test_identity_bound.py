"""Memory under a flood of client identities: 100 000 distinct clients, each sending one
request through a trusted proxy, leave a bucket table bounded in entries and in bytes.

Kept apart from test_ratelimit.py, which mutation testing re-runs once per mutant of the
identity and bucket rules: this check takes seconds, and the rules are held there.
"""

from __future__ import annotations

import tracemalloc

from rag_contract.web.ratelimit import Allowance, MemoryStore
from rag_contract.web.ratelimit.identity import client_identity

CLIENTS = 100_000
BOUND = 5_000
BYTES_PER_BUCKET_CEILING = 1_000  # measured ~300: key, state, expiry and dict slot


def test_100k_unique_identities_leave_the_table_bounded_in_count_and_bytes():
    allowance = Allowance(per_minute=60, burst=10, trusted_proxy_hops=2)
    # Every client its own /64, behind a proxy that appended its own address; all at one
    # instant, so no bucket has expired and only the size bound holds the table.
    keys = [client_identity("10.0.0.1", f"2001:db8:{i >> 16:x}:{i & 0xFFFF:x}::1, 10.0.0.2", 2) for i in range(CLIENTS)]
    assert len(set(keys)) == CLIENTS and max(map(len, keys)) <= len("2001:db8:1:ffff::/64")
    store = MemoryStore(max_buckets=BOUND)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for key in keys:
            store.take((key + " ")[:-1], 0.0, allowance)  # a fresh string, as each request brings
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(store) == BOUND
    assert grown < BOUND * BYTES_PER_BUCKET_CEILING


def test_8kb_forwarded_entries_cost_no_more_than_the_peer():
    # The probe that found this: 15 500 distinct 8 KB identities left 105 MB resident. An
    # entry that is no address now falls back to the peer: one bucket, however many values.
    allowance = Allowance(per_minute=60, burst=10, trusted_proxy_hops=1)
    store = MemoryStore()
    for i in range(2_000):
        store.take(client_identity("10.0.0.1", f"{i:08d}" * 1024, 1), 0.0, allowance)
    assert len(store) == 1
