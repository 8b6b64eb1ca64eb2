"""The quality gate turned red check by check, and the reports it holds to the code."""
