"""``python -m agent`` runs the kernelwright command line."""

from .cli import main

main()
