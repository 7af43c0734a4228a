"""``sparkwatch demo``: stateful queries on a local Spark, watched live by sparkwatch.

``session`` builds the Spark session, ``queries`` defines one query per state operator kind,
``table`` renders the live table, ``runner`` ties them to the listener (``sparkwatch.attach``).
"""
