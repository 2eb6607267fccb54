"""The model, on the ground floor: the OpenAI-compatible client, the chat template and its sandbox, the
tokenizer that counts exactly, the hub that fetches a model's files, and the helpers that keep untrusted
text out of a prompt's control tokens. Everything that talks to a model imports from here."""
