"""First-party ``web-search`` server: crawl and index web pages into a local SQLite FTS5 index and search it."""
