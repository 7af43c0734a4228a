"""`python -m bench console`: page times of the browser console over a large history."""
