"""The inbox watcher: turns files dropped into knowledge/inbox/ into indexed, cited knowledge."""
