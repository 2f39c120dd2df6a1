"""The building blocks of the use cases: the corpus writer, the ingestion pipeline, the second
dense arm, admission control and the answer and page lanes, follow-up rewriting and the password
policy. Routes call the use-case modules of `app.services`, which build on these; nothing here
imports a use case."""
