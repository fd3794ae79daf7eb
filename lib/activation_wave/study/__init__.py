"""Running the study: the pipeline's steps, chapter analyses, notebook execution and book glue."""
