"""One module per chapter: ``run(cfg, ...)`` computes a chapter's analysis and returns its frozen result object."""
