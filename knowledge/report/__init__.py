"""Reports on the knowledge base for people: what it holds, what runs, what is being read (both front ends show them)."""
