"""``python -m agent`` runs the kernelwright command line."""

from .launch import main

main()
