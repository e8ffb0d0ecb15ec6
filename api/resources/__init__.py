"""Falcon resources, one module per area of the contract. Each declares its `operations`."""
