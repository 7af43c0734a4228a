"""``python -m bench listener``: the time Spark's listener thread spends per progress event.

It compares sparkwatch's raw JVM receiver with a listener registered through PySpark's public
``addListener``, and counts the progress events each receives with 1, 6 and 12 stateful queries.
Every Spark run happens in its own subprocess (:mod:`bench.listener.child`) so runs cannot slow
each other.
"""
