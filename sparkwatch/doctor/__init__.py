"""sparkwatch.doctor"""
