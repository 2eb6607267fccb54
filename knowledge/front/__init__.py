"""The terminal front end: the kb command line, the terminal chat, the status summary and kb doctor."""
