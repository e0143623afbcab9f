"""Class mode: the teacher's run on every student's screen (store: SQLite or PostgreSQL; teacher: the run, what it
publishes, the reveal and failover; figures: its two charts)."""
