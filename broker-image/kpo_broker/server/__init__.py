"""The broker's request-serving side: socket server, request handlers, replica manager, partitions, fetchers."""
