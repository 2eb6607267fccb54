"""The owner's votes on answers (👍 / 👎): what was asked and cited, kept in the conversation file, and
exported as a regression set that bench/feedback_replay.py replays against the index."""
