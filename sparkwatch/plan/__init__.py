"""sparkwatch.plan"""
