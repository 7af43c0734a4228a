"""sparkwatch benchmarks, run as ``python -m bench <name>``; figures go to ``docs/benchmarks.md``.

``python -m bench listener`` compares the time Spark's listener thread spends per progress event in
sparkwatch's raw JVM receiver and in a listener registered through PySpark's public
``addListener``, and how many progress events each receives with 1, 6 and 12 stateful queries.
Every Spark run happens in its own subprocess (:mod:`bench.child`) so runs cannot slow each other.
"""
