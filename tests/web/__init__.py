"""The served app: routes, pages, the rate limiter, index cut-over, browser and load runs."""
