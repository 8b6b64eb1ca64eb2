"""The project's own tests (a package, so shared helpers import as ``tests.support``)."""
