"""The broker's request-serving side.

Socket server, request handlers, replica manager, partitions and replica fetchers.
"""
