"""Training drafters: the training-time test, and the experiment runner that trains many."""
