"""`python -m perfscout` runs the CLI."""

from perfscout.cli import main

main()
