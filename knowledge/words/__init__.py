"""The words kb writes to people, in their language: one message catalog (gettext, through Babel) for
English, Traditional Chinese and Thai, Simplified Chinese derived from the Traditional with OpenCC."""
