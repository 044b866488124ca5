"""Tables, files and plots of what `capture` measured (later issue)."""
