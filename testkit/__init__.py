"""What the tests, the benchmarks and the evaluation harness share: a live API server and a
local scale-out stack as real subprocesses, document builders, a corpus and a file indexed into
it without the job layer, and a tiny cross-encoder written on the spot.

It sits between `app/` and its users: it imports the service, and `tests/`, `bench/` and `eval/`
import it; it imports none of them (tests/test_import_layers.py)."""
