"""The Telegram front end of the kb assistant."""
