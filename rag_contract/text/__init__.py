"""Text: the lowest layer, how every other layer reads words."""
