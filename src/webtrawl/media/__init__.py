"""Media: audio and video found on pages (and by per-site resolvers), downloaded with Range resume."""
