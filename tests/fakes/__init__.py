"""Deliberately misbehaving components, registered only by the tests that use them."""
