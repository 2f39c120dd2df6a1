"""Pictures of cited pages: PDF pages rendered with a passage highlighted."""
