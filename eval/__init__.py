"""Offline evaluation of retrieval and answers on the data in ../shared/data."""
