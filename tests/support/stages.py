"""The stages a free-text answer's budget names, in order, when its question vector comes from a
shared call of the embedder (``answering.batching``): the wait for that call, the call, then the
stages every answer has."""

BATCHED_STAGES = ("embedding_wait", "embedding", "retrieval", "drafting", "grounding", "relevance")
