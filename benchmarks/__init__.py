"""asyncfs against its peers: ``python -m benchmarks`` (see :mod:`benchmarks.run`)."""
