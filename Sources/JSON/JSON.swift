// JSON module
