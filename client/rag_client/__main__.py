"""`python -m rag_client`: the `rag` command where no console script was installed."""

from rag_client.cli import main

main()
