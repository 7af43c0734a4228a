"""What a checkpoint's state holds: operators, stores, rows and bytes per partition, the largest
keys and the change feed, read with Spark 4's State Data Source (read-only, aggregated in Spark)."""
