"""Voice questions: audio bytes → the words said.

* :mod:`knowledge.speech.decode`: ``decode_audio(data, max_s=...)`` → 16 kHz mono float32 (PyAV);
* :mod:`knowledge.speech.filters`: pure rules on Whisper's output (zh/en/th only, phantom phrases,
  Traditional Chinese);
* :mod:`knowledge.speech.transcribe`: ``transcribe_audio(data, settings=..., runner=...)``, the one
  entry point, with ``speech_runner()``, ``model_notice(spec)`` and the ``Transcriber`` protocol.

Failures are :class:`knowledge.errors.SpeechError` (``reason`` + a sentence for the owner).
"""
