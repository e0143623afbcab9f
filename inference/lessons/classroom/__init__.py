"""Class mode: the teacher's run on every student's screen (store: SQLite or PostgreSQL behind one interface;
session: what is published and revealed; resume: a teacher's run taken up on another app host)."""
