"""sparkwatch.top"""
