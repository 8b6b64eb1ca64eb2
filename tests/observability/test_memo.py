"""Bounded memos: reads are dict reads, a full memo is emptied before the next entry, and an
identity memo never answers for another object."""

from __future__ import annotations

import pytest

from rag_contract.observability.memo import BoundedMemo, IdentityMemo


def test_a_full_memo_is_emptied_before_it_keeps_the_next_entry():
    memo: BoundedMemo[str, int] = BoundedMemo(2)
    assert memo.keep("a", 1) == 1 and memo.keep("b", 2) == 2
    assert memo.get("a") == 1 and len(memo) == 2
    memo.keep("c", 3)
    assert dict(memo) == {"c": 3}


def test_a_memo_needs_room_for_one_entry():
    with pytest.raises(ValueError, match="limit must be >= 1"):
        BoundedMemo(0)


def test_an_identity_memo_answers_only_for_the_object_it_holds():
    memo: IdentityMemo[str] = IdentityMemo(4)
    first, twin = [1], [1]  # equal, not the same object
    memo.keep(first, "first")
    assert memo.get(first) == "first"
    assert memo.get(twin) is None
