"""The execution report: figures from the recorded series, verdicts, and the documents built from them."""
