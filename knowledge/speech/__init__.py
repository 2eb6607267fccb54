"""Voice questions: audio bytes → decoded samples → text (see decode.py and transcribe.py)."""
