"""Dataset loaders and the synthetic memory world (data itself lives in datasets/)."""
