"""The frontier: every URL of a crawl with its state, behind one batch-first protocol (`base.Frontier`)."""
