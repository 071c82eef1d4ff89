"""launch stage."""
