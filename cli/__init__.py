"""Command line: the ``sentinel`` console script."""
