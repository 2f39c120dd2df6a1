"""`rag`: the command line of the RAG service, for scripts and people."""

__version__ = "0.1.0"
