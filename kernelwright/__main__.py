"""``python -m kernelwright`` runs the kernelwright command line."""

from ._cli import main

main()
