// SQLite module
