"""A plain Atropos environment kept as a package: run it as ``python -m mathpkg.env``."""
