"""The web board: server-rendered pages (Jinja2), plain CSS and a little plain JavaScript, nothing loaded
from outside the service. Pages are signed into with the same basic credentials as the API."""
