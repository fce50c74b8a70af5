"""Ops written once against the backend kernel set; the front ends compose them."""
