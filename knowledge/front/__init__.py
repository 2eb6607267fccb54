"""The terminal front end: the kb command line, the terminal chat and kb doctor."""
