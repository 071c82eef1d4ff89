"""The typed IR shared by every stage."""
