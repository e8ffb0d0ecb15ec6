"""The stand-alone clients of the service: the writing notify hook and the ops runner. Each needs only the
standard library and `requests` and imports nothing of the service's, so a content repository can copy the hook."""
