"""syntax stage."""
