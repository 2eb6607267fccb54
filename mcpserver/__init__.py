"""``kb mcp``: the knowledge base for the owner's other tools over the Model Context Protocol (stdio, loopback HTTP)."""
