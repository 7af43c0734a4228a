"""The sparkwatch collector (``sparkwatch.collector``): receives events pushed by listeners of
many apps. ``spool`` is also imported by the listener, so it stays standard-library only."""
