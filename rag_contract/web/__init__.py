"""The HTTP presenter: the Starlette app and pages, how a server process is assembled, the rate limit."""
