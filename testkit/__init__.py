"""What the tests and the benchmarks share: a live API server and a local scale-out stack as
real subprocesses, document builders, and a tiny cross-encoder written on the spot.

It sits between `app/` and its users: it imports the service, and `tests/` and `bench/` import
it; it imports neither of them (tests/test_import_layers.py)."""
