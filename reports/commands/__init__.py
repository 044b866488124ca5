"""One module per subcommand: each reads its flags, calls capture, and renders the result."""
