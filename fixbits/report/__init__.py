"""JUnit XML merging and drift summaries (``fixbits report``)."""
