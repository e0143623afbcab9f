"""Class mode: the teacher's run on every student's screen (store: the shared SQLite file; session: what is published and revealed)."""
