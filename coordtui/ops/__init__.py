"""Operator screens: everything an operator does through the API, by key and from the command palette."""
