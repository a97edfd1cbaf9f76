"""Command-line interface: one module per subcommand, loaded only when it is called."""
