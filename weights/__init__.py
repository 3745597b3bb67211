"""The shipped networks, as package data (tabula.weights): DEFAULT names the files `tabula gtp` plays with."""
