"""One answer: retrieve, draft claims, ground each claim, decide the state, under a deadline."""
