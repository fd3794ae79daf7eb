"""Chapter analyses: one module per chapter of the book, each a run() returning a result object."""
