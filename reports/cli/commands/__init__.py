"""One module per subcommand: `add_parser` (its flags) and `run`. Top-level imports stay
light (the parser is built from them); the work's imports are inside `run`.
"""
