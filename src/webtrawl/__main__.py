"""`python -m webtrawl`."""

from .cli import main

main()
