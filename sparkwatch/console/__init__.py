"""The browser console: server-rendered pages with SVG charts over the history and live state."""
