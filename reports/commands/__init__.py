"""One module per subcommand: each defines its flags (add_parser), reads them, calls capture,
and renders the result. args.py holds the flags several share; console.py the rest they share."""
