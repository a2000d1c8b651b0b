"""Tables, plots, galleries and HTML reports built from the run store."""
